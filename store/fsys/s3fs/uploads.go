package s3fs

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/quiverdb/quiver/store/fsys"
)

// An in-progress multipart upload is S3's counterpart of a local disk's
// hidden temp file: invisible at its name until completed. List shows it
// as ".<base>.upload-<id>.tmp" (id: the upload id, base64url), dated by
// its newest part, so that sweep and verify see live and abandoned writes
// like temps; Delete of that name aborts the upload.

const uploadMark = ".upload-"

type upload struct {
	key, id   string
	initiated time.Time
}

func uploadTempName(base, id string) string {
	return "." + base + uploadMark + base64.RawURLEncoding.EncodeToString([]byte(id)) + fsys.TempSuffix
}

// parseUploadTemp undoes uploadTempName.
func parseUploadTemp(name string) (base, id string, ok bool) {
	if !fsys.IsTemp(name) {
		return "", "", false
	}
	inner := name[1 : len(name)-len(fsys.TempSuffix)]
	i := strings.LastIndex(inner, uploadMark)
	if i <= 0 {
		return "", "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(inner[i+len(uploadMark):])
	if err != nil || len(raw) == 0 {
		return "", "", false
	}
	return inner[:i], string(raw), true
}

// uploads lists the multipart uploads under prefix: with delimiter "/"
// those directly under it and the sub-prefixes holding others.
func (f *FS) uploads(ctx context.Context, prefix, delimiter string) ([]upload, []string, error) {
	var (
		ups  []upload
		dirs []string
		in   = &s3.ListMultipartUploadsInput{Bucket: &f.bucket, Prefix: &prefix}
	)
	if delimiter != "" {
		in.Delimiter = &delimiter
	}
	for {
		out, err := f.client.ListMultipartUploads(ctx, in)
		if err != nil {
			return nil, nil, f.clean(err)
		}
		for _, u := range out.Uploads {
			ups = append(ups, upload{key: aws.ToString(u.Key), id: aws.ToString(u.UploadId), initiated: aws.ToTime(u.Initiated)})
		}
		for _, cp := range out.CommonPrefixes {
			dirs = append(dirs, aws.ToString(cp.Prefix))
		}
		if !aws.ToBool(out.IsTruncated) {
			return ups, dirs, nil
		}
		if aws.ToString(out.NextKeyMarker) == aws.ToString(in.KeyMarker) && aws.ToString(out.NextUploadIdMarker) == aws.ToString(in.UploadIdMarker) {
			return ups, dirs, nil // a service that does not advance: stop rather than loop
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
}

// uploadTime is when an upload last made progress: its start, or for one
// started a while ago the time of its newest part.
func (f *FS) uploadTime(ctx context.Context, u upload) (time.Time, error) {
	newest := u.initiated
	if time.Since(u.initiated) < uploadAgeCheck {
		return newest, nil
	}
	p := s3.NewListPartsPaginator(f.client, &s3.ListPartsInput{Bucket: &f.bucket, Key: &u.key, UploadId: &u.id})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			if err = f.clean(err); errors.Is(err, fsys.ErrNotExist) {
				return newest, nil // finished meanwhile
			}
			return time.Time{}, err
		}
		for _, part := range page.Parts {
			if t := aws.ToTime(part.LastModified); t.After(newest) {
				newest = t
			}
		}
	}
	return newest, nil
}

// abort aborts an upload; one already gone is not an error.
func (f *FS) abort(ctx context.Context, key, id string) error {
	_, err := f.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &f.bucket, Key: &key, UploadId: &id})
	if err = f.clean(err); err != nil && !errors.Is(err, fsys.ErrNotExist) {
		return err
	}
	return nil
}
