package spend

import "time"

// Period is the span after which a budget starts again from nothing: a UTC
// day, an ISO week (from Monday 00:00 UTC), a calendar month in UTC, or
// never (Total).
type Period uint8

const (
	Total Period = iota
	Day
	Week
	Month
)

var periodNames = [...]string{"total", "day", "week", "month"}

func (p Period) String() string { return periodNames[p] }

// ParsePeriod reads a config's period; "" is Total.
func ParsePeriod(s string) Period {
	for i, n := range periodNames {
		if n == s {
			return Period(i)
		}
	}
	return Total
}

// Start returns the Unix second at which the period that holds t began:
// the key of its spend. Total's is 0.
func (p Period) Start(t time.Time) int64 {
	t = t.UTC()
	y, m, d := t.Date()
	switch p {
	case Day:
		return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix()
	case Week:
		back := (int(t.Weekday()) + 6) % 7 // days since Monday
		return time.Date(y, m, d-back, 0, 0, 0, 0, time.UTC).Unix()
	case Month:
		return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC).Unix()
	}
	return 0
}

// End returns the Unix second at which the period that began at start ends,
// 0 for Total.
func (p Period) End(start int64) int64 {
	t := time.Unix(start, 0).UTC()
	switch p {
	case Day:
		return t.AddDate(0, 0, 1).Unix()
	case Week:
		return t.AddDate(0, 0, 7).Unix()
	case Month:
		return t.AddDate(0, 1, 0).Unix()
	}
	return 0
}
