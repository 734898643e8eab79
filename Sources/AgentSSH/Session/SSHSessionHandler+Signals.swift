#if canImport(Glibc)
import Glibc
#endif

/// The signal names of RFC 4254 (`signal` requests, `exit-signal`) and their numbers.
extension SSHSessionHandler {
    static func signalled(_ status: Int32) -> Bool {
        let low = status & 0x7f
        return low != 0 && low != 0x7f
    }

    /// RFC 4254's names (no `SIG` prefix) for the signals the reference maps; any other name
    /// is SIGKILL, as in the reference.
    static let signals: [(String, Int32)] = [
        ("ABRT", SIGABRT), ("ALRM", SIGALRM), ("FPE", SIGFPE), ("HUP", SIGHUP), ("ILL", SIGILL), ("INT", SIGINT),
        ("KILL", SIGKILL), ("PIPE", SIGPIPE), ("QUIT", SIGQUIT), ("SEGV", SIGSEGV), ("TERM", SIGTERM), ("USR1", SIGUSR1),
        ("USR2", SIGUSR2),
    ]

    static func signalNumber(_ name: String) -> Int32 {
        signals.first { $0.0 == name }?.1 ?? SIGKILL
    }

    static func signalName(_ number: Int32) -> String {
        if let known = signals.first(where: { $0.1 == number }) { return known.0 }
        let extra: [Int32: String] = [SIGBUS: "BUS", SIGCHLD: "CHLD", SIGCONT: "CONT", SIGSTOP: "STOP", SIGTSTP: "TSTP", SIGTRAP: "TRAP", SIGSYS: "SYS", SIGXCPU: "XCPU", SIGXFSZ: "XFSZ", SIGWINCH: "WINCH", SIGTTIN: "TTIN", SIGTTOU: "TTOU", SIGURG: "URG", SIGPROF: "PROF", SIGVTALRM: "VTALRM", SIGIO: "IO", SIGPWR: "PWR"]
        return extra[number] ?? "KILL"
    }
}
