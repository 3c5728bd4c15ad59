package sandbox

import (
	"fmt"
	"strings"
)

// preludeSource runs before the program, in the same interpreter: it reads
// the nonce, sets the limits, installs the audit hook and runs program.py
// as __main__; the nonce is printed only when the program ran to its end.
// The %s are filled by prelude.
const preludeSource = `
import os, sys, resource
def _sandbox():
    nonce = sys.stdin.readline().strip()
    sys.stdin.close()
    try:
        os.close(0)
    except OSError:
        pass
    for r, v in ((resource.RLIMIT_CPU, (%[1]d, %[1]d + 1)), (resource.RLIMIT_AS, (%[2]d, %[2]d)),
                 (resource.RLIMIT_FSIZE, (%[3]d, %[3]d)), (resource.RLIMIT_CORE, (0, 0))):
        resource.setrlimit(r, v)
    if %[4]d > 0:
        resource.setrlimit(resource.RLIMIT_NPROC, (%[4]d, %[4]d))
    home = os.path.realpath(os.getcwd())
    src = open(os.path.join(home, "program.py"), encoding="utf-8").read()
    deny = frozenset((%[5]s))
    paths = frozenset((%[6]s))
    two = frozenset(("os.rename", "os.link", "os.symlink", "shutil.copyfile", "shutil.copytree", "shutil.move"))
    wflags = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
    def inside(p):
        if isinstance(p, int):
            return True
        try:
            p = os.fsdecode(os.fspath(p))
        except Exception:
            return False
        rp = os.path.realpath(os.path.join(home, p))
        return rp == home or rp.startswith(home + os.sep)
    def hook(event, args):
        if event in deny:
            raise PermissionError("sandbox: " + event + " is not allowed")
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, 0))[:3]
            write = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (isinstance(flags, int) and flags & wflags)
            if write and not inside(path):
                raise PermissionError("sandbox: writing outside the scratch directory is not allowed: " + repr(path))
        elif event in paths:
            for p in (args[:2] if event in two else args[:1]):
                if isinstance(p, (str, bytes, os.PathLike)) and not inside(p):
                    raise PermissionError("sandbox: " + event + " outside the scratch directory is not allowed: " + repr(p))
    sys.dont_write_bytecode = True
    sys.addaudithook(hook)
    code = compile(src, "program.py", "exec")
    try:
        exec(code, {"__name__": "__main__", "__builtins__": __builtins__})
    except SystemExit as e:
        print("sandbox: the program exited early (%%r)" %% (e.code,), file=sys.stderr)
        sys.stderr.flush()
        os._exit(3)
    sys.stdout.flush()
    os.write(1, ("\n" + nonce + "\n").encode())
_sandbox()
`

// denied are the audit events refused outright.
var denied = []string{
	"socket.__new__", "socket.bind", "socket.connect", "socket.sendto", "socket.getaddrinfo",
	"os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn", "os.system", "os.startfile",
	"subprocess.Popen", "pty.spawn",
	"ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata", "ctypes.call_function",
	"resource.setrlimit", "resource.prlimit",
	"os.kill", "os.killpg", "signal.pthread_kill",
}

// pathEvents are the audit events refused for a path outside the scratch
// directory.
var pathEvents = []string{
	"os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.chflags",
	"os.link", "os.symlink", "os.truncate", "os.utime", "os.setxattr", "os.removexattr",
	"os.mkfifo", "os.mknod", "shutil.rmtree", "shutil.copyfile", "shutil.copytree",
	"shutil.copymode", "shutil.copystat", "shutil.move", "shutil.chown", "os.chdir",
}

// prelude returns the prelude with the limits filled in (procs 0: no
// process limit).
func prelude(l Limits, procs int) string {
	cpu := max(1, int(l.CPU.Seconds()+0.5))
	return fmt.Sprintf(preludeSource, cpu, l.Memory, l.FileSize, procs, pyStrings(denied), pyStrings(pathEvents))
}

func pyStrings(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ") + ","
}
