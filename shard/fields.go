package shard

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode"
)

// A counter struct declares each counter's kind where the counter is defined,
// in a struct tag that AddFields reads at report time:
//
//	type Stats struct {
//		RxFrames   uint64    `stat:"count"`
//		RxRingFull uint64    `stat:"drop"`
//		KickErrors uint64    `stat:"error"`
//		FreeFrames int       `stat:"gauge"`
//		Responses  [6]uint64 `stat:"-"` // left out: reported by hand
//	}
//
// A tag needs no import of this package. The defining package's tests call
// CheckFields, so a counter added without a kind fails there.
const statTag = "stat"

// AddFields adds every integer field of the struct v (or *v) as a counter
// named prefix + the field name in snake case (RxRingFull -> rx_ring_full),
// of the kind its stat tag names. Fields tagged "-" and fields that are not
// integers are left out; an integer without a valid tag counts as a Count.
// It reads fields by reflection: report time only, never per packet.
func (r *Report) AddFields(prefix string, v any) {
	rv := reflect.Indirect(reflect.ValueOf(v))
	if rv.Kind() != reflect.Struct {
		panic(fmt.Sprintf("shard: AddFields of %v, not a struct", rv.Type()))
	}
	rt := rv.Type()
	for i := range rt.NumField() {
		f := rt.Field(i)
		tag := f.Tag.Get(statTag)
		if tag == "-" || !isInteger(f.Type) {
			continue
		}
		k, _ := parseKind(tag)
		r.AddKind(prefix+snake(f.Name), k, uintValue(rv.Field(i)))
	}
}

// CheckFields reports every field of the struct v (or *v) whose kind is not
// declared: an integer without a stat tag of count, drop, error, gauge or -,
// an array or slice of integers not tagged "-" (AddFields cannot name its
// elements), or a stat tag on a field AddFields does not read.
func CheckFields(v any) error {
	rt := reflect.TypeOf(v)
	if rt != nil && rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	if rt == nil || rt.Kind() != reflect.Struct {
		return fmt.Errorf("%v is not a struct", rt)
	}
	var errs []error
	for i := range rt.NumField() {
		f := rt.Field(i)
		tag, tagged := f.Tag.Lookup(statTag)
		_, valid := parseKind(tag)
		listed := (f.Type.Kind() == reflect.Array || f.Type.Kind() == reflect.Slice) && isInteger(f.Type.Elem())
		switch {
		case isInteger(f.Type) && !tagged:
			errs = append(errs, fmt.Errorf("%s.%s has no stat tag: want count, drop, error, gauge or -", rt.Name(), f.Name))
		case isInteger(f.Type) && !valid && tag != "-":
			errs = append(errs, fmt.Errorf("%s.%s: stat tag %q, want count, drop, error, gauge or -", rt.Name(), f.Name, tag))
		case listed && tag != "-":
			errs = append(errs, fmt.Errorf("%s.%s: a list AddFields cannot name: tag it stat:\"-\" and report it by hand", rt.Name(), f.Name))
		case !isInteger(f.Type) && !listed && tagged && tag != "-":
			errs = append(errs, fmt.Errorf("%s.%s: stat tag on a %s, which AddFields does not read", rt.Name(), f.Name, f.Type))
		}
	}
	return errors.Join(errs...)
}

// parseKind reads a stat tag's kind; false if the tag names none.
func parseKind(tag string) (Kind, bool) {
	for k, name := range kindNames {
		if tag == name {
			return Kind(k), true
		}
	}
	return Count, false
}

func isInteger(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return true
	}
	return false
}

// uintValue reads an integer field; a negative level (a bug) reads as 0, so
// the counter stays in the report.
func uintValue(v reflect.Value) uint64 {
	if v.CanUint() {
		return v.Uint()
	}
	return uint64(max(v.Int(), 0))
}

// snake turns a Go field name into snake case, keeping acronyms together:
// IPv4BadChecksum -> ipv4_bad_checksum, RxRingFull -> rx_ring_full.
func snake(s string) string {
	var b strings.Builder
	rs := []rune(strings.NewReplacer("IPv4", "Ipv4", "ACKs", "Acks").Replace(s))
	for i, c := range rs {
		if unicode.IsUpper(c) && i > 0 {
			prevLower := unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1])
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if prevLower || (nextLower && unicode.IsUpper(rs[i-1])) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}
