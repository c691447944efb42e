package browser

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// liveProcesses returns the processes, zombies aside, for which match is
// true given their process group and command line (arguments joined by
// spaces). A process that exits while it is looked at is left out.
func liveProcesses(match func(pgid int, cmdline string) bool) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err1 := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		cmdline, err2 := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err1 != nil || err2 != nil {
			continue
		}
		// After the command's name, which is in parentheses and may hold
		// anything: state, ppid, pgrp.
		i := strings.LastIndexByte(string(stat), ')')
		fields := strings.Fields(string(stat[i+1:]))
		if i < 0 || len(fields) < 3 || fields[0] == "Z" {
			continue
		}
		pgid, _ := strconv.Atoi(fields[2])
		if match(pgid, strings.ReplaceAll(string(cmdline), "\x00", " ")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killStragglers kills what is left of Chromium outside its process
// group: its crash handler starts a session of its own. Such a process
// names dir on its command line (its database is under $HOME, which is
// dir). It waits, for a second at most, until they are gone, so that none
// writes to dir while Close removes it.
func killStragglers(dir string) {
	mine := func(_ int, cmdline string) bool { return strings.Contains(cmdline, dir+"/") }
	deadline := time.Now().Add(time.Second)
	for {
		pids := liveProcesses(mine)
		if len(pids) == 0 || time.Now().After(deadline) {
			return
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		// Not our children: there is no wait for them, only looking again.
		time.Sleep(10 * time.Millisecond)
	}
}
