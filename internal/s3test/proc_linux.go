package s3test

import "syscall"

// childAttr makes the server die with the test process, even one killed
// by a timeout.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
