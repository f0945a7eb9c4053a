package kubelet

// Containers' logs, as the container runtime keeps them: a file per
// container instance, each line with the time it was written (on the
// kubelet's clock), read as the CRI log reader reads them
// (k8s.io/cri-client/pkg/logs): tail, since, timestamps, limit, follow.

import (
	"context"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// rfc3339NanoFixed is the runtime's timestamp format: RFC 3339 with nine
// fractional digits always, so that prefixes line up.
const rfc3339NanoFixed = "2006-01-02T15:04:05.000000000Z07:00"

// containerLogs are a container's log files: by container ID, and the one
// written before its first instance started (which that instance takes).
type containerLogs struct {
	pending *logFile
	files   map[string]*logFile
}

// logFile is one container instance's log. changed is closed (and
// replaced) at every write.
type logFile struct {
	lines   []logLine
	changed chan struct{}
}

// logLine is a line of output, with its newline, and when it was written.
type logLine struct {
	at   time.Time
	text string
}

// SetLogs makes text what the container of the pod has logged: the log of
// its current instance (of the instance that starts next, if none runs
// yet), each line written now on the server's clock. A final line without
// a newline gets one, as the runtime ends a partial line at exit.
func (k *Kubelet) SetLogs(namespace, pod, container, text string) {
	k.writeLog(namespace, pod, container, text, true)
}

// AppendLog adds text to what the container of the pod has logged, as
// SetLogs does; clients following its log (kubectl logs -f) or attached
// to it see it now.
func (k *Kubelet) AppendLog(namespace, pod, container, text string) {
	k.writeLog(namespace, pod, container, text, false)
}

func (k *Kubelet) writeLog(namespace, pod, container, text string, replace bool) {
	t := k.currentLog(namespace+"/"+pod, container)
	now := k.clock.Now().UTC()
	var lines []logLine
	for text != "" {
		line, rest, found := strings.Cut(text, "\n")
		lines = append(lines, logLine{at: now, text: line + "\n"})
		text = rest
		if !found {
			break
		}
	}
	s := k.streams
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.file(t)
	if replace {
		f.lines = nil
	}
	f.lines = append(f.lines, lines...)
	close(f.changed)
	f.changed = make(chan struct{})
}

// file is the log of t's instance, or the pending log when no instance
// started yet; the first instance takes the pending log. Called with s.mu
// held.
func (s *streams) file(t logTarget) *logFile {
	key := t.pod + "/" + t.container
	c := s.logs[key]
	if c == nil {
		c = &containerLogs{files: map[string]*logFile{}}
		s.logs[key] = c
	}
	newFile := func() *logFile { return &logFile{changed: make(chan struct{})} }
	if t.instance == "" {
		if c.pending == nil {
			c.pending = newFile()
		}
		return c.pending
	}
	f := c.files[t.instance]
	if f == nil {
		if t.instance == t.first && c.pending != nil {
			f, c.pending = c.pending, nil
		} else {
			f = newFile()
		}
		c.files[t.instance] = f
	}
	return f
}

// snapshot is the log's lines now, and what is closed at its next write.
func (s *streams) snapshot(t logTarget) ([]logLine, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.file(t)
	return f.lines, f.changed
}

// currentLog is the log of the container's instance that started last
// (with no instance when none has).
func (k *Kubelet) currentLog(pod, name string) logTarget {
	k.mu.Lock()
	defer k.mu.Unlock()
	t := logTarget{pod: pod, container: name}
	if c := k.runtimeContainer(pod, name); c != nil && !c.instance.started.IsZero() {
		t.instance, t.first = c.instance.id, firstInstance(c)
	}
	return t
}

// logOf is the log of the container's instance id.
func (k *Kubelet) logOf(pod, name, id string) logTarget {
	k.mu.Lock()
	defer k.mu.Unlock()
	t := logTarget{pod: pod, container: name, instance: id}
	if c := k.runtimeContainer(pod, name); c != nil {
		t.first = firstInstance(c)
	}
	return t
}

// firstInstance is the ID of the container's first instance while the
// runtime knows it: the current one or the previous one.
func firstInstance(c *container) string {
	switch {
	case c.restarts == 0:
		return c.instance.id
	case c.restarts == 1 && c.last != nil:
		return c.last.id
	}
	return ""
}

// runtimeContainer is the container of the pod (namespace/name) as the
// runtime runs it; nil if it does not. Called with k.mu held.
func (k *Kubelet) runtimeContainer(pod, name string) *container {
	r := k.running[k.keys[pod]]
	if r == nil || r.deleted {
		return nil
	}
	for _, c := range r.all() {
		if c.spec.Name == name {
			return c
		}
	}
	return nil
}

// logTarget is a container instance's log: the pod (namespace/name), the
// container, the instance's ID ("": the next to start) and the ID of the
// container's first instance, which takes what was logged before it
// started.
type logTarget struct {
	pod, container, instance, first string
}

// writeLogs writes the instance's log to w as opts select, then, with
// follow, what it logs later, until the instance ends (and its log is
// read), ctx ends or the limit is reached.
func (k *Kubelet) writeLogs(ctx context.Context, t logTarget, opts *corev1.PodLogOptions, w io.Writer) error {
	since := k.since(opts)
	out := &logWriter{w: w, timestamps: opts.Timestamps, left: -1}
	if opts.LimitBytes != nil {
		out.left = *opts.LimitBytes
	}
	pos := -1
	for {
		lines, changed := k.streams.snapshot(t)
		podChanged := k.streams.podSignal(t.pod)
		running := opts.Follow && k.instanceRunning(t)
		if pos < 0 { // where the tail starts, from the lines there at first
			pos = 0
			if opts.TailLines != nil {
				pos = max(0, len(lines)-int(*opts.TailLines))
			}
		}
		for ; pos < len(lines); pos++ {
			if lines[pos].at.Before(since) {
				continue
			}
			if err := out.line(lines[pos]); err != nil {
				return err
			}
			if out.left == 0 {
				return nil
			}
		}
		if !running {
			return nil
		}
		select {
		case <-changed:
		case <-podChanged:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// since is the time before which lines are skipped: sinceSeconds before
// now, or sinceTime if later.
func (k *Kubelet) since(opts *corev1.PodLogOptions) time.Time {
	var since time.Time
	if opts.SinceSeconds != nil {
		since = k.clock.Now().Add(-time.Duration(*opts.SinceSeconds) * time.Second)
	}
	if opts.SinceTime != nil && opts.SinceTime.After(since) {
		since = opts.SinceTime.Time
	}
	return since
}

// instanceRunning: the container instance still runs.
func (k *Kubelet) instanceRunning(t logTarget) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	c := k.runtimeContainer(t.pod, t.container)
	return c != nil && c.instance.id == t.instance && c.instance.running()
}

// attachLogOptions follow what a container logs from now on: an attached
// client sees its output from then.
func attachLogOptions() *corev1.PodLogOptions {
	none := int64(0)
	return &corev1.PodLogOptions{Follow: true, TailLines: &none}
}

// logWriter writes log lines, with their timestamps if asked, up to left
// bytes (-1: no limit), cutting the last line to fit, as the CRI log
// reader does.
type logWriter struct {
	w          io.Writer
	timestamps bool
	left       int64
}

func (l *logWriter) line(line logLine) error {
	text := line.text
	if l.timestamps {
		text = line.at.Format(rfc3339NanoFixed) + " " + text
	}
	if l.left >= 0 && int64(len(text)) > l.left {
		text = text[:l.left]
	}
	if l.left >= 0 {
		l.left -= int64(len(text))
	}
	_, err := io.WriteString(l.w, text)
	return err
}
