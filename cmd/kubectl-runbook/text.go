package main

import (
	"fmt"
	"strings"
	"time"
	"unicode"
)

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// list joins names for a sentence; "none" rather than nothing, so that an
// empty list does not read as a value left out.
func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// oneLine is s on one line, with every control character (terminal escape
// sequences a tenant may have smuggled into a message) shown as '?'.
func oneLine(s string) string {
	return strings.Join(strings.Fields(printable(s)), " ")
}

// printable replaces control characters other than whitespace with '?'.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) && !unicode.IsSpace(r) || r == unicode.ReplacementChar {
			return '?'
		}
		return r
	}, s)
}

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// shortDuration is d to the minute as people write it: 2h, 2h30m, 45m.
func shortDuration(d time.Duration) string {
	s := d.Round(time.Minute).String()
	s = strings.TrimSuffix(s, "0s")
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	if s == "" {
		return "0m"
	}
	return s
}
