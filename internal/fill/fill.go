// Package fill sets every field of a value to a distinct non-zero value by reflection, so
// that round-trip tests (the store's fast decoder, the Redis wire format, the raw item
// writer) cover every field a struct has, including one added after the test was written:
// a place that forgets the new field loses its value and the test fails.
package fill

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"time"
)

// timeType is time.Time, filled as a time (not as a struct of unexported fields).
var timeType = reflect.TypeFor[time.Time]()

// rawJSONType is json.RawMessage (inbox.JSON), filled with a JSON document.
var rawJSONType = reflect.TypeFor[json.RawMessage]()

// Fill sets every exported field of the struct ptr points to, recursively: strings to
// "<Field>-<n>", integers to n, booleans to true, times to distinct UTC instants with
// millisecond precision, pointers to a filled new value, json.RawMessage to {"n":n},
// other slices to one filled element, maps to one filled key and value; n grows with
// every field, so no two fields are equal. A pointer to a struct type the path is inside
// already (a recursive type, as inbox.Badge.Own) is left nil, and Zero does not report
// it. It returns an error naming a field of a kind it cannot fill (channels, funcs,
// interfaces): extend Fill rather than leave a field out.
func Fill(ptr any) error {
	v := reflect.ValueOf(ptr)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("fill: want a pointer to a struct, got %T", ptr)
	}
	n := 0
	return fillValue(v.Elem(), v.Elem().Type().Name(), &n, nil)
}

func fillValue(v reflect.Value, name string, n *int, path []reflect.Type) error {
	*n++
	switch {
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(*n) * time.Millisecond)))
		return nil
	case v.Type() == rawJSONType:
		v.SetBytes([]byte(fmt.Sprintf(`{"n":%d}`, *n)))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("%s-%d", name, *n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(*n) + 0.5)
	case reflect.Pointer:
		if slices.Contains(path, v.Type().Elem()) {
			return nil
		}
		p := reflect.New(v.Type().Elem())
		if err := fillValue(p.Elem(), name, n, path); err != nil {
			return err
		}
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		if err := fillValue(s.Index(0), name, n, path); err != nil {
			return err
		}
		v.Set(s)
	case reflect.Map:
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		if err := fillValue(k, name, n, path); err != nil {
			return err
		}
		if err := fillValue(e, name, n, path); err != nil {
			return err
		}
		m := reflect.MakeMapWithSize(v.Type(), 1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		t := v.Type()
		path = append(path, t)
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if err := fillValue(v.Field(i), f.Name, n, path); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("fill: field %s is a %s, which Fill cannot fill yet", name, v.Kind())
	}
	return nil
}

// Zero returns the names of the exported fields of the struct ptr points to that hold
// their zero value, recursively through pointers and structs (not into time.Time), as
// dotted paths; a nil pointer is reported as itself.
func Zero(ptr any) []string {
	var out []string
	zero(reflect.ValueOf(ptr).Elem(), "", &out, nil)
	return out
}

func zero(v reflect.Value, path string, out *[]string, inside []reflect.Type) {
	switch {
	case v.Type() == timeType:
		if v.Interface().(time.Time).IsZero() {
			*out = append(*out, path)
		}
		return
	case v.Kind() == reflect.Pointer:
		if v.IsNil() {
			if !slices.Contains(inside, v.Type().Elem()) {
				*out = append(*out, path)
			}
			return
		}
		zero(v.Elem(), path, out, inside)
		return
	case v.Kind() == reflect.Struct:
		t := v.Type()
		inside = append(inside, t)
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() {
				p := f.Name
				if path != "" {
					p = path + "." + f.Name
				}
				zero(v.Field(i), p, out, inside)
			}
		}
		return
	}
	if v.IsZero() {
		*out = append(*out, path)
	}
}
