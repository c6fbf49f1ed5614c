//go:build !linux

package s3test

import "syscall"

func childAttr() *syscall.SysProcAttr { return nil }
