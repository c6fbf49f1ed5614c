package store

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiverdb/quiver/store/codec"
)

// pinCSVTypes makes sn, a snapshot of pinned files, read with the CSV
// types o.CSVTypes carries (SnapshotOptions.CSVTypes) instead of those
// the version's files give now. They are the types of a plan made before
// appends that changed them; they may also be forged, so they are
// checked: only types CSV inference gives, exactly the version's columns,
// and values of the pinned files that fit them by the inference rule.
// Only a column whose carried type does not take every value its current
// type does (string takes any; float64 an int64's; a column with no value
// in any file, any) needs its files read for that; then every pinned file
// is inferred again before the read starts, so that a forged type is
// refused (ErrInvalidArgument), never converted, nor reported as a file
// that does not decode.
func (s *Store) pinCSVTypes(ctx context.Context, p profile, vs *VersionState, sn *Snapshot, o SnapshotOptions) error {
	what := fmt.Sprintf("%s %s: csv_types", p, VersionName(vs.Version))
	if sn.Format != FormatCSV {
		return fmt.Errorf("%w: %s: the version is %s, not CSV", ErrInvalidArgument, what, sn.Format)
	}
	if o.Files == nil {
		return fmt.Errorf("%w: %s go with the pinned files of a planned endpoint (\"files\")", ErrInvalidArgument, what)
	}
	cur := sn.Schema
	types := make(map[string]arrow.DataType, len(o.CSVTypes))
	for _, name := range slices.Sorted(maps.Keys(o.CSVTypes)) { // one message for one ticket
		tn := o.CSVTypes[name]
		t, ok := codec.CSVType(tn)
		if !ok {
			return fmt.Errorf("%w: %s give column %q the type %q (want %s)", ErrInvalidArgument, what, truncateName(name), truncateName(tn), codec.CSVTypeNames)
		}
		if len(cur.FieldIndices(name)) != 1 {
			return fmt.Errorf("%w: %s name column %q, which the version does not have", ErrInvalidArgument, what, truncateName(name))
		}
		types[name] = t
	}
	fields := slices.Clone(cur.Fields())
	var missing []string
	check := map[string]arrow.DataType{}
	changed := false
	for i, f := range fields {
		t, ok := types[f.Name]
		if !ok {
			if missing = append(missing, f.Name); len(missing) == 8 {
				break
			}
			continue
		}
		if arrow.TypeEqual(t, f.Type) {
			continue
		}
		fields[i].Type, changed = t, true
		if !codec.CSVTypeCovers(t, f.Type) && !slices.Contains(vs.CSVUntyped, f.Name) {
			check[f.Name] = t
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s lack columns of the version: %s", ErrInvalidArgument, what, codec.QuoteNames(missing))
	}
	if !changed {
		return nil // the version's types: its schema as it is
	}
	if len(check) > 0 {
		var inf codec.CSVInference
		for _, df := range sn.Files {
			fh, err := s.openData(ctx, p, df, false)
			if err != nil {
				return err
			}
			err = inf.AddFile(fh, -1)
			fh.Close()
			if err != nil {
				return s.badFile(p, df, err)
			}
		}
		if err := inf.CheckFits(check); err != nil {
			return fmt.Errorf("%w: %s do not fit the pinned files: %v", ErrInvalidArgument, what, err)
		}
	}
	var md *arrow.Metadata
	if cur.HasMetadata() {
		m := cur.Metadata()
		md = &m
	}
	sn.Schema = arrow.NewSchema(fields, md)
	return nil
}
