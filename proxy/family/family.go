package family

// Family is an upstream protocol family.
type Family uint8

const (
	// Alpha speaks the Anthropic Messages and Files protocols.
	Alpha Family = iota
	// Beta speaks the OpenAI Chat, Responses, Images and Files protocols.
	Beta
	// Gamma speaks the Gemini generateContent protocol.
	Gamma
	// Count is the number of families: arrays indexed by Family have Count
	// elements.
	Count
)

var names = [Count]string{"alpha", "beta", "gamma"}

func (f Family) String() string {
	if f < Count {
		return names[f]
	}
	return "unknown"
}

// Parse returns the family named s ("alpha", "beta" or "gamma").
func Parse(s string) (Family, bool) {
	for i, n := range names {
		if s == n {
			return Family(i), true
		}
	}
	return 0, false
}
