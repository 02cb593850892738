package postgres

import "testing"

func TestHasPassword(t *testing.T) {
	for _, tc := range []struct {
		dsn  string
		want bool
	}{
		{"host=a user=b dbname=c", false},
		{"host=a password=x dbname=c", true},
		{"host=a  password = x", true},
		{"password=x host=a", true},
		{"host=a passwordless=1", false},
		{"postgres://u@h:5432/db", false},
		{"postgres://u:secret@h:5432/db", true},
		{"postgresql://u@h/db?password=secret", true},
		{"postgres://u@h/db?sslmode=disable", false},
	} {
		if got := hasPassword(tc.dsn); got != tc.want {
			t.Errorf("hasPassword(%q) = %v, want %v", tc.dsn, got, tc.want)
		}
	}
}
