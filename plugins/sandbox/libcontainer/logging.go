package main

import (
	"io"

	"github.com/hashicorp/go-hclog"
	"github.com/sirupsen/logrus"
)

// routeLogrus sends libcontainer's logrus output (its own warnings and the
// errors "runc init" forwards over its log pipe) to hclog on stderr, so the
// plugin logs in one format and never writes to stdout.
func routeLogrus(l hclog.Logger) {
	logrus.SetOutput(io.Discard)
	logrus.SetLevel(logrus.WarnLevel)
	logrus.AddHook(logrusHook{l: l.Named("libcontainer")})
}

type logrusHook struct{ l hclog.Logger }

func (logrusHook) Levels() []logrus.Level {
	return []logrus.Level{logrus.PanicLevel, logrus.FatalLevel, logrus.ErrorLevel, logrus.WarnLevel}
}

func (h logrusHook) Fire(e *logrus.Entry) error {
	args := make([]any, 0, 2*len(e.Data))
	for k, v := range e.Data {
		args = append(args, k, v)
	}
	if e.Level <= logrus.ErrorLevel {
		h.l.Error(e.Message, args...)
	} else {
		h.l.Warn(e.Message, args...)
	}
	return nil
}
