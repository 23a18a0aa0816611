package lab

import "errors"

// ErrNotRoot is returned when the process lacks the privileges to build a lab.
var ErrNotRoot = errors.New("lab needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN for namespaces): run as root")
