package store_test

func helperBench(dir string, a helperArgs) error { return nil }
