package s3fs

import "time"

// SetUploadAgeCheck changes the age after which an upload is dated by
// its newest part, for a test; it returns the previous value.
func SetUploadAgeCheck(d time.Duration) time.Duration {
	old := uploadAgeCheck
	uploadAgeCheck = d
	return old
}
