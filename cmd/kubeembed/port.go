package main

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// lastingPort returns a free port on bind for a server whose port is kept in
// its data directory, chosen below the system's ephemeral range: a port the
// kernel picks (0) is in that range, where any outgoing connection of the
// machine may take it as its local port once the server stops, and the
// next start with the same data directory would then fail (CI saw a test's
// restart lose its port so). 0 (the kernel's choice) when the range is not
// known or nothing below it is free.
func lastingPort(bind string) int {
	low := ephemeralLow()
	const from = 10000 // above the well-known and most registered services' ports
	if low <= from+100 {
		return 0
	}
	for range 20 {
		p := from + rand.IntN(low-from)
		ln, err := net.Listen("tcp", net.JoinHostPort(bind, strconv.Itoa(p)))
		if err == nil {
			_ = ln.Close()
			return p
		}
	}
	return 0
}

// ephemeralLow is the first port of the system's ephemeral range (Linux's
// net.ipv4.ip_local_port_range), or 0 if unknown.
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(data))
	if len(fields) != 2 {
		return 0
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil {
		return 0
	}
	return low
}
