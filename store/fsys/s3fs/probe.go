package s3fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/quiverdb/quiver/store/fsys"
)

// Support is what Probe found the service to honour. Quiver needs the
// first two; without the third, Config.NoConditionalComplete is the
// fallback.
type Support struct {
	// ConditionalCreate: PutObject with If-None-Match: * fails (412) on an
	// existing key.
	ConditionalCreate bool `json:"conditional_create"`
	// ConditionalReplace: PutObject with If-Match fails on another ETag
	// and succeeds on the current one.
	ConditionalReplace bool `json:"conditional_replace"`
	// ConditionalComplete: CompleteMultipartUpload with If-None-Match: *
	// fails on an existing key.
	ConditionalComplete bool `json:"conditional_complete"`
	// ConditionalDelete: DeleteObject with If-Match fails on another ETag
	// (the store releases its manifest lock with it; without it the
	// release is a read, a compare and a plain delete).
	ConditionalDelete bool `json:"conditional_delete"`
}

// Probe finds out which conditional requests the service honours, by
// trying each on a scratch object under the prefix
// (".quiver-probe/<random>", removed afterwards). A service that ignores
// a condition fails the check rather than erroring, which is why this
// tries instead of trusting documentation. Errors are those of the
// requests themselves (no access, no bucket).
func (f *FS) Probe(ctx context.Context) (Support, error) {
	var sup Support
	if err := f.begin(ctx, true); err != nil {
		return sup, fmt.Errorf("s3fs: probe: %w", err)
	}
	key := f.prefix + ".quiver-probe/" + newWriteID()
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = f.deleteKeys(cctx, []string{key}, "")
	}()
	fail := func(step string, err error) (Support, error) {
		return sup, fmt.Errorf("s3fs: probe (%s): %w", step, f.clean(err))
	}
	putIf := func(noneMatch bool, match string) (string, error) {
		in := &s3.PutObjectInput{Bucket: &f.bucket, Key: &key, Body: bytes.NewReader([]byte(match))}
		if noneMatch {
			in.IfNoneMatch = aws.String("*")
		}
		if match != "" {
			in.IfMatch = aws.String(match)
		}
		out, err := f.client.PutObject(ctx, in, noRetry)
		if err != nil {
			return "", err
		}
		return aws.ToString(out.ETag), nil
	}
	// refused: the condition held the write back (412, or 404 for If-Match
	// on AWS); a 501 or 400 means "not supported", which is a no too.
	refused := func(err error) (bool, error) {
		if err == nil {
			return false, nil
		}
		c := f.clean(err)
		var se *serviceError
		switch {
		case errors.Is(c, fsys.ErrPrecondition):
			return true, nil
		case errors.As(c, &se) && (se.status == 501 || se.status == 400):
			return false, nil
		}
		return false, err
	}

	etag, err := putIf(true, "")
	if err != nil {
		return fail("create", err)
	}
	_, err = putIf(true, "")
	if sup.ConditionalCreate, err = refused(err); err != nil {
		return fail("create again", err)
	}
	if !sup.ConditionalCreate {
		// The second put replaced the first: start over from its ETag.
		out, herr := f.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &f.bucket, Key: &key})
		if herr != nil {
			return fail("head", herr)
		}
		etag = aws.ToString(out.ETag)
	}
	_, err = putIf(false, `"0123456789abcdef0123456789abcdef"`)
	wrongRefused, err := refused(err)
	if err != nil {
		return fail("replace with a wrong ETag", err)
	}
	if wrongRefused {
		if _, err = putIf(false, etag); err == nil {
			sup.ConditionalReplace = true
		} else if _, err = refused(err); err != nil {
			return fail("replace", err)
		}
	}

	cmu, err := f.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &f.bucket, Key: &key})
	if err != nil {
		return fail("create multipart upload", err)
	}
	id := aws.ToString(cmu.UploadId)
	defer func() { _ = f.abort(context.WithoutCancel(ctx), key, id) }()
	num := int32(1)
	up, err := f.client.UploadPart(ctx, &s3.UploadPartInput{Bucket: &f.bucket, Key: &key, UploadId: &id, PartNumber: &num, Body: bytes.NewReader([]byte("p"))})
	if err != nil {
		return fail("upload part", err)
	}
	_, err = f.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &f.bucket, Key: &key, UploadId: &id, IfNoneMatch: aws.String("*"),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: &num, ETag: up.ETag}}},
	}, noRetry)
	if sup.ConditionalComplete, err = refused(err); err != nil {
		return fail("complete multipart upload", err)
	}

	_, err = f.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &f.bucket, Key: &key, IfMatch: aws.String(`"0123456789abcdef0123456789abcdef"`)}, noRetry)
	if sup.ConditionalDelete, err = refused(err); err != nil {
		return fail("conditional delete", err)
	}
	if sup.ConditionalDelete {
		// A refusal that left the object in place, not one that lost it.
		if _, herr := f.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &f.bucket, Key: &key}); herr != nil {
			sup.ConditionalDelete = false
		}
	}
	return sup, nil
}

// Require fails with ErrNoConditionalWrites unless the service honours
// what Quiver cannot do without (conditional create and replace).
func (s Support) Require() error {
	if !s.ConditionalCreate || !s.ConditionalReplace {
		return fmt.Errorf("%w: If-None-Match honoured %v, If-Match honoured %v", ErrNoConditionalWrites, s.ConditionalCreate, s.ConditionalReplace)
	}
	return nil
}
