package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// isTerminal reports whether w is a terminal. Only an *os.File can be one;
// tests hand the commands buffers and pipes.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// colorOK is whether w may get ANSI colour: a terminal, and NO_COLOR
// (https://no-color.org) unset.
func colorOK(w io.Writer) bool {
	return isTerminal(w) && os.Getenv("NO_COLOR") == ""
}

// progressMode is the --progress flag: auto shows a bar only when stderr is
// a terminal.
type progressMode string

func (m *progressMode) String() string { return string(*m) }
func (m *progressMode) Type() string   { return "auto|always|never" }
func (m *progressMode) Set(s string) error {
	switch s {
	case "auto", "always", "never":
		*m = progressMode(s)
		return nil
	}
	return fmt.Errorf("want auto, always or never, not %q", s)
}

func (m progressMode) show(w io.Writer) bool {
	switch m {
	case "always":
		return true
	case "never":
		return false
	}
	return isTerminal(w)
}

// progress is a bar on stderr, or nothing. Its methods are safe on nil.
type progress struct {
	bar   *progressbar.ProgressBar
	color bool
}

// newProgress makes a bar of max units (bytes when bytes is true, rows
// otherwise; max <= 0 when unknown) on w, or returns nil when there should
// be none.
func newProgress(w io.Writer, mode progressMode, max int64, bytes bool, desc string) *progress {
	if !mode.show(w) {
		return nil
	}
	color := colorOK(w)
	if color {
		desc = "[cyan]" + desc + "[reset]"
	}
	if max <= 0 {
		max = -1
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(80 * time.Millisecond),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionEnableColorCodes(color),
		progressbar.OptionUseANSICodes(color),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSpinnerType(14),
	}
	if bytes {
		opts = append(opts, progressbar.OptionShowBytes(true), progressbar.OptionUseIECUnits(true))
	} else {
		opts = append(opts, progressbar.OptionSetItsString("rows"))
	}
	if color {
		opts = append(opts, progressbar.OptionSetTheme(progressbar.Theme{
			Saucer: "[green]=[reset]", SaucerHead: "[green]>[reset]", SaucerPadding: " ", BarStart: "[", BarEnd: "]",
		}))
	} else {
		opts = append(opts, progressbar.OptionSetTheme(progressbar.Theme{
			Saucer: "=", SaucerHead: ">", SaucerPadding: " ", BarStart: "[", BarEnd: "]",
		}))
	}
	return &progress{bar: progressbar.NewOptions64(max, opts...), color: color}
}

// add advances the bar. The bar's own errors (past max, for instance when
// a file grows while it is read) are of no interest to the user.
func (p *progress) add(n int64) {
	if p != nil && n != 0 {
		_ = p.bar.Add64(n)
	}
}

func (p *progress) describe(s string) {
	if p == nil {
		return
	}
	if p.color {
		s = "[cyan]" + s + "[reset]"
	}
	p.bar.Describe(s)
}

// finish clears the bar from the terminal.
func (p *progress) finish() {
	if p != nil {
		_ = p.bar.Finish()
		_ = p.bar.Exit()
	}
}
