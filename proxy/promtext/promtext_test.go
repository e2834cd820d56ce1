package promtext

import "testing"

func TestAppendLabelValue(t *testing.T) {
	for in, want := range map[string]string{
		"":             `""`,
		"team-a":       `"team-a"`,
		`a"b\c` + "\n": `"a\"b\\c\n"`,
		"é\t":          "\"é\t\"",
	} {
		if got := string(AppendLabelValue(nil, in)); got != want {
			t.Errorf("AppendLabelValue(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestAppendMetadata(t *testing.T) {
	got := string(AppendMetadata([]byte("x\n"), "gateway_requests_total", "counter", "requests answered"))
	want := "x\n# HELP gateway_requests_total requests answered\n# TYPE gateway_requests_total counter\n"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
