// Package ipcdict writes Arrow IPC streams whose float dictionaries arrive
// bit for bit.
//
// arrow-go's ipc.Writer (v18.8) does not send a batch's dictionary again
// when it is equal to the last one sent within an absolute tolerance of
// 1e-5, NaNs all equal (array.ApproxEqual): the reader then decodes the
// batch with the earlier dictionary, so 0.0 arrives as -0.0, 1.000001 as 1
// and one NaN payload as another. Writer sends such a batch through a new
// ipc.Writer, which sends every dictionary anew; the new writer's schema
// message is dropped, so the stream stays one stream.
//
// Every writer of IPC streams in Quiver that may carry dictionaries (the
// server's DoGet, the Go client's DoPut, `quiver get --format arrows`)
// writes through it; the IPC file format, which holds one dictionary per
// field, is checked with Changed instead.
package ipcdict
