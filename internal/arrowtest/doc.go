// Package arrowtest holds Arrow helpers that tests of several packages
// share: Peak, an allocator that records the most bytes held at once, and
// builders of batches with values that are easy to get wrong (float
// dictionaries that differ only in their bits). It imports nothing of
// Quiver, so the tests of any package (store's own included) may use it.
package arrowtest
