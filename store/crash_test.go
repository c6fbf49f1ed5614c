package store_test

func helperCrashLoop(dir string, a helperArgs) error { return nil }
func helperLockHold(dir string, a helperArgs) error  { return nil }
