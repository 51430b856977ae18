package github

import (
	"strings"
)

// MaxLoginLen is the longest GitHub login.
const MaxLoginLen = 39

// Mentions returns the logins @-mentioned in markdown text, in order of first appearance,
// each once (case-insensitively; the first spelling wins).
//
// A mention is '@' not preceded by a word character ([A-Za-z0-9_]), followed by a login:
// 1..MaxLoginLen ASCII letters, digits or single hyphens, neither starting nor ending with a
// hyphen. "@org/team" (a team mention) and "@name_x" are not logins. Mentions inside fenced
// code blocks (``` or ~~~) and inline code spans are ignored, as GitHub does.
func Mentions(text string) []string {
	text = stripCode(text)
	var out []string
	seen := map[string]bool{}
	for i := 0; i < len(text); i++ {
		if text[i] != '@' || (i > 0 && isWord(text[i-1])) {
			continue
		}
		j := i + 1
		for j < len(text) && (isAlnum(text[j]) || text[j] == '-') {
			j++
		}
		if j < len(text) && (text[j] == '/' || text[j] == '_' || text[j] == '@') {
			i = j - 1
			continue
		}
		login := strings.TrimRight(text[i+1:j], "-")
		i = j - 1
		if !validLogin(login) || seen[strings.ToLower(login)] {
			continue
		}
		seen[strings.ToLower(login)] = true
		out = append(out, login)
	}
	return out
}

// validLogin reports whether s is a syntactically valid GitHub login.
func validLogin(s string) bool {
	if s == "" || len(s) > MaxLoginLen || s[0] == '-' || s[len(s)-1] == '-' || strings.Contains(s, "--") {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) && s[i] != '-' {
			return false
		}
	}
	return true
}

// stripCode blanks fenced code blocks and inline code spans out of markdown text.
func stripCode(text string) string {
	var b strings.Builder
	fence := ""
	for _, line := range strings.SplitAfter(text, "\n") {
		t := strings.TrimLeft(line, " ")
		if fence == "" && (strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")) {
			fence = t[:3]
			b.WriteString("\n")
			continue
		}
		if fence != "" {
			if strings.HasPrefix(t, fence) {
				fence = ""
			}
			b.WriteString("\n")
			continue
		}
		b.WriteString(stripSpans(line))
	}
	return b.String()
}

// stripSpans blanks `inline code` spans (matching backtick runs) out of one line.
func stripSpans(line string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(line, '`')
		if i < 0 {
			b.WriteString(line)
			return b.String()
		}
		n := i
		for n < len(line) && line[n] == '`' {
			n++
		}
		run := line[i:n]
		end := strings.Index(line[n:], run)
		if end < 0 {
			b.WriteString(line)
			return b.String()
		}
		b.WriteString(line[:i])
		b.WriteByte(' ')
		line = line[n+end+len(run):]
	}
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isWord(c byte) bool { return isAlnum(c) || c == '_' }
