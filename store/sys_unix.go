package store

import "syscall"

const syscallENOTDIR = syscall.ENOTDIR
