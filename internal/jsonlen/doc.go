// Package jsonlen measures strings as encoding/json writes them, without
// encoding them: the store bounds a commit record by it, the catalog packs
// file paths into tickets by it.
package jsonlen
