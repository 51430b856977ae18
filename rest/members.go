package rest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// unmarshalerType is json.Unmarshaler's.
var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// exactMembers checks body (one JSON value that decoded into a value of type t) for what
// encoding/json accepts although the API's document does not: a member whose name matches
// a field only when case is ignored ("EMAIL" for email, which encoding/json takes for the
// field while DisallowUnknownFields sees nothing unknown), a member given twice (encoding/json
// keeps the last, so the body says two things and the gateway acts on one), and a member
// no field names inside a value decoded by its own UnmarshalJSON (a nullable member's
// object, where DisallowUnknownFields does not reach). It returns a client-safe message,
// "" when the body names its members exactly. Values the gateway keeps as they are (a
// notification's data) and maps are not checked.
func exactMembers(body []byte, t reflect.Type) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	msg, err := checkMembers(dec, t, "")
	if err != nil {
		return "the request body is not valid JSON"
	}
	return msg
}

// checkMembers reads one value of dec, decoded into a value of type t (nil: not
// checked) at path, and returns what is wrong with its members ("" for nothing).
func checkMembers(dec *json.Decoder, t reflect.Type, path string) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", err
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return "", nil // a scalar
	}
	t = checkedType(t)
	switch {
	case delim == '{' && t != nil && t.Kind() == reflect.Struct:
		fields := jsonFields(t)
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return "", err
			}
			name, _ := tok.(string)
			at := name
			if path != "" {
				at = path + "." + name
			}
			ft, ok := fields[name]
			if !ok {
				return fmt.Sprintf("unknown field %q", at), nil
			}
			if seen[name] {
				return fmt.Sprintf("member %q is given twice", at), nil
			}
			seen[name] = true
			if msg, err := checkMembers(dec, ft, at); msg != "" || err != nil {
				return msg, err
			}
		}
	case delim == '[' && t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		for i := 0; dec.More(); i++ {
			if msg, err := checkMembers(dec, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); msg != "" || err != nil {
				return msg, err
			}
		}
	default: // not checked: skip to its end
		for depth := 1; depth > 0; {
			tok, err := dec.Token()
			if err != nil {
				return "", err
			}
			switch tok {
			case json.Delim('{'), json.Delim('['):
				depth++
			case json.Delim('}'), json.Delim(']'):
				depth--
			}
		}
		return "", nil
	}
	_, err = dec.Token() // the closing delimiter
	return "", err
}

// checkedType returns the type whose members checkMembers checks for a value decoded into
// t: t without pointers, a nullable's value type (a map[bool]T with its own UnmarshalJSON,
// oapi-codegen's nullable.Nullable), nil for a type that decodes itself otherwise.
func checkedType(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || !reflect.PointerTo(t).Implements(unmarshalerType) {
		return t
	}
	if t.Kind() == reflect.Map && t.Key().Kind() == reflect.Bool {
		return checkedType(t.Elem())
	}
	return nil
}

// jsonFields returns the fields of struct type t by their exact JSON names (embedded
// structs' fields as t's own), as encoding/json names them.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for n, typ := range jsonFields(ft) {
					if _, ok := out[n]; !ok {
						out[n] = typ
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}
