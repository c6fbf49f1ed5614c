package catalog

import "errors"

// ErrInvalid marks a malformed descriptor, ticket or action body. Messages
// built around it say what is wrong and never name a server path.
var ErrInvalid = errors.New("catalog: invalid request")

// ErrUnknownAction is returned for an action type the service does not have.
var ErrUnknownAction = errors.New("catalog: unknown action")
