// Package codec is Quiver's Arrow ⇄ Parquet/CSV layer: everything that looks
// at the values of a batch or the bytes of a data file, and nothing that knows
// about profiles, versions, commits or storage.
//
// # What it owns
//
//   - Schema conformance (PlanConform, Conformer, ConformArray): an incoming
//     schema is matched to a version's by column name, reordered, relabelled
//     where only nested names or nullability differ, and widened where the
//     widening is lossless (LosslessWidening). Nothing else is ever cast.
//   - Validation of untrusted batches (ValidateBatch): every buffer, offset,
//     child length, dictionary index and union type id is checked before an
//     encoder sees the data, and so are values the Arrow spec constrains and
//     Parquet would otherwise change (decimal precision, whole-day date64).
//     Nulls in a field declared non-nullable, at any depth, are refused with
//     the column path and the null count. A value is never changed: it is
//     stored as given or the batch is refused.
//   - Hive partitions: which types may partition (Partitionable,
//     CheckPartitionBy), the directory encoding pyarrow reads (PartitionDir,
//     ParsePartitionDir, FormatPartValue, CanonicalPartValue), splitting a
//     batch by partition with vectorised kernels (SplitByPartition) and
//     restoring partition columns on read (ConstantColumn).
//   - Files: the Parquet writer properties (Format, Compression,
//     WriterProperties), a FileWriter that encodes Parquet or CSV to any
//     io.Writer while hashing and counting what it writes, Parquet footers and
//     readers (ReadFooter, OpenParquet) and the CSV reader (NewCSVReader).
//   - Dictionary columns written with one dictionary per row group
//     (dictwrite.go): batches transposed onto it or a new row group, so
//     that pqarrow never expands a dictionary into dense pages, and files
//     hold only the dictionary values their rows use.
//   - CSV type inference (CSVInference), one rule for the store's CSV
//     profiles and for `quiver put` of CSV files: the types polars infers
//     (int64, float64, bool, else string; an empty field is null);
//     CSVValueFits holds the rows after those inferred from to the rule.
//   - Field-id stripping (StripFieldIDs): pqarrow adds PARQUET:field_id to
//     every field it reads; schemas are compared without it.
//
// # Memory
//
// Every function that allocates Arrow memory takes an allocator, either as
// an option or through compute.WithAllocator on its context; every Arrow
// object it returns must be released by the caller.
//
// # Caveats
//
// CSV keeps no schema: a CSV profile's types are inferred on every read, as
// pyrosome's CsvDal does, so small integers come back as int64, dates as
// strings, and an empty string as null.
package codec
