package cudalib

import (
	"fmt"
)

// Status is an ABI status code.
type Status int32

const (
	OK           Status = 0
	EInval       Status = 1
	EUnsupported Status = 2
	ENoDevice    Status = 3
	EDevice      Status = 4
	ENoMem       Status = 5
)

func (s Status) String() string {
	switch s {
	case OK:
		return "SSMK_OK"
	case EInval:
		return "SSMK_EINVAL"
	case EUnsupported:
		return "SSMK_EUNSUPPORTED"
	case ENoDevice:
		return "SSMK_ENODEVICE"
	case EDevice:
		return "SSMK_EDEVICE"
	case ENoMem:
		return "SSMK_ENOMEM"
	}
	return fmt.Sprintf("status(%d)", int32(s))
}

// Error is a non-zero status from the library with its ssmk_last_error().
// errors.Is(err, cudalib.EInval) matches on the status.
type Error struct {
	Func   string
	Status Status
	Msg    string
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %v: %s", e.Func, e.Status, e.Msg) }

// Is lets errors.Is(err, cudalib.ENoDevice) test the status.
func (e *Error) Is(target error) bool {
	s, ok := target.(Status)
	return ok && s == e.Status
}

// Error makes a Status usable as an errors.Is target.
func (s Status) Error() string { return s.String() }
