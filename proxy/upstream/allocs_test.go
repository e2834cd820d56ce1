//go:build !race

package upstream
