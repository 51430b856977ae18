// Package tmpl owns notification templates: Liquid sources (title, body, email subject,
// HTML and text, push title and body, SMS text), versioned per id and locale in the store
// (store/templates.go), validated when they are put, checked against a send's data when a
// send pins a version (Service.Pin) and rendered per recipient (Service.Render) through a
// bounded cache of parsed versions.
//
// Liquid is github.com/osteele/liquid with these rules:
//   - Strict variables: an output ({{ x }}) whose value is undefined (nil) is an error
//     naming the expression. A filter that turns nil into text hides it ({{ x | upcase }}
//     renders ""), as in Liquid's own strict mode; {{ x | default: "…" }} is the way to make a
//     variable optional.
//   - No includes: {% include %} and {% render %} are refused at parse time (a template
//     never reads a file or another template).
//   - Escaping (inbox.PartField.Escape), of every output wherever it stands (in if,
//     unless, case, loops, captures): each escaping a channel declares (inbox.Escaping)
//     is a filter of its name, appended to every output of such a field unless its last
//     filter is raw ({{ body_html | raw }}), that filter or one of the escaping's
//     AsWritten. In an email's HTML part each output is HTML-escaped (escape; escape_once
//     also counts); in a chat message's text its markup's control characters are, so
//     data shows as written while the author's own markup (<{{ url }}|View>, *bold*)
//     stays. Other parts (title, body, email subject and text, push, SMS) are plain text
//     and are not escaped. A capture in an escaping part holds escaped text: output it
//     with | raw.
//   - Bounds: a part's source is at most MaxPartBytes; one render of one part writes at
//     most MaxOutputBytes, runs at most MaxIterations loop iterations and RenderTimeout
//     (checked at every iteration, write, assign, filter and block); every string a filter
//     takes or makes, an assign stores or a capture makes is at most MaxValueBytes, every
//     array at most MaxArrayItems items; an array or object holds at most MaxValueBytes
//     bytes of strings and MaxArrayItems items in all, nested ones and every reference
//     counted (so no variable, filter argument or comparison operand is more text than
//     that). Past any of them the render fails with BAD_USER_INPUT.
//   - Ranges: (a..b) has at most MaxArrayItems items wherever it is written (a loop, an
//     assign, a filter's input or parameter), counted from its bounds, whatever they are,
//     before any item is made; with integer bounds written in the template, over that is
//     refused when the template is put, and so is a property or an index of a range
//     ((1..5).AsArray). A loop walks its range without building it.
//   - Conditions: a block has at most MaxClauses clauses and, with them, an output or a
//     tag at most MaxComparisons comparisons (refused when put); a send's data has no
//     array or object of more than MaxArrayItems items. Its whole numbers are ints (range
//     bounds, loop limits and offsets).
package tmpl
