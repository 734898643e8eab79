import AgentTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// packaging/workspace-agent.service as `make install-files` installs it: the agent's children
/// are the user's own shells, terminals, SSH sessions and chat commands, so the unit must not
/// take from them what the same user's login would have (sudo and every setuid program first),
/// `systemd-analyze verify` must accept the installed unit, `make install` must refuse a unit
/// user that does not exist, and a PREFIX in the home directory installs a user unit.
///
/// systemd-run is not available where the tests run, so the unit's settings are reproduced as
/// far as the test can: NoNewPrivileges (written, or implied in a user unit by the settings
/// that install a seccomp filter) with `setpriv --no-new-privs`, and the capabilities that
/// CapabilityBoundingSet= and ProtectKernelModules/ProtectKernelLogs/ProtectClock drop with
/// `setpriv --bounding-set`; the settings no command can reproduce (ProtectSystem,
/// RestrictSUIDSGID, ...) are checked to be absent by name. Runs as root (it makes a setuid
/// copy of cat(1) in a directory of its own).
@Suite(.timeLimit(.minutes(3)))
struct ServiceUnitTests {
    static let root = DocExamples.repositoryRoot.path
    static let sourceUnit = root + "/packaging/workspace-agent.service"

    /// The settings that reach the user's commands, with what they would take from them
    /// (packaging/workspace-agent.service says the same in its comments).
    static let childReaching: [(key: String, takes: String)] = [
        ("NoNewPrivileges", "sudo, su and every setuid program"),
        ("RestrictSUIDSGID", "making setuid files: dpkg installing sudo, chmod u+s"),
        ("ProtectSystem", "writing /usr and /etc, even as root: sudo apt-get install"),
        ("ProtectHome", "the user's home"),
        ("PrivateTmp", "the shared /tmp (scripts find the agent socket there)"),
        ("PrivateDevices", "devices"),
        ("PrivateNetwork", "the network"),
        ("PrivateUsers", "root: a setuid program's root would be an unmapped user"),
        ("ProtectKernelTunables", "sudo sysctl -w"),
        ("ProtectKernelModules", "sudo modprobe (CAP_SYS_MODULE)"),
        ("ProtectKernelLogs", "sudo dmesg (CAP_SYSLOG)"),
        ("ProtectControlGroups", "containers (a read-only /sys/fs/cgroup)"),
        ("ProtectClock", "sudo date -s (CAP_SYS_TIME), and before systemd 253 most devices"),
        ("ProtectHostname", "sudo hostname"),
        ("ProtectProc", "other users' processes in ps, even for sudo"),
        ("RestrictRealtime", "real-time scheduling (audio, chrt)"),
        ("RestrictAddressFamilies", "AF_PACKET (tcpdump), AF_VSOCK, Bluetooth"),
        ("RestrictNamespaces", "unshare, bubblewrap, rootless containers"),
        ("SystemCallArchitectures", "i386 programs"),
        ("SystemCallFilter", "the system calls it names"),
        ("LockPersonality", "setarch, and gdb's disabling of address randomization"),
        ("MemoryDenyWriteExecute", "JIT compilers"),
        ("CapabilityBoundingSet", "the capabilities it drops, for sudo too"),
        ("LimitNOFILE", "a login's descriptor limits (1024 soft, 524288 hard)"),
        ("UMask", "the user's own umask"),
        ("DevicePolicy", "devices"),
        ("DeviceAllow", "every device it does not name"),
        ("ReadOnlyPaths", "writing what it names"),
        ("InaccessiblePaths", "what it names"),
    ]

    /// Settings that install a seccomp filter and, without CAP_SYS_ADMIN in the manager (a
    /// user unit), imply NoNewPrivileges=yes (systemd.exec(5), NoNewPrivileges=).
    static let implyNoNewPrivilegesInUserUnits = [
        "LockPersonality", "MemoryDenyWriteExecute", "PrivateDevices", "ProtectClock", "ProtectHostname",
        "ProtectKernelLogs", "ProtectKernelModules", "ProtectKernelTunables", "RestrictAddressFamilies", "RestrictNamespaces",
        "RestrictRealtime", "RestrictSUIDSGID", "SystemCallArchitectures", "SystemCallFilter", "SystemCallLog",
    ]

    /// The [Service] settings of a unit (the last assignment of a key wins, an empty one resets).
    static func serviceSettings(_ unit: String) -> [String: String] {
        var settings: [String: String] = [:]
        var section = ""
        for raw in unit.split(separator: "\n", omittingEmptySubsequences: true) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("#") || line.hasPrefix(";") || line.isEmpty { continue }
            if line.hasPrefix("[") {
                section = line
                continue
            }
            guard section == "[Service]", let equals = line.firstIndex(of: "=") else { continue }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            settings[key] = value.isEmpty ? nil : value
        }
        return settings
    }

    /// Whether a setting is in force: present and not false ("no", "false", "0", "off"); a
    /// list (RestrictAddressFamilies=, SystemCallFilter=, ...) counts as on.
    static func isOn(_ settings: [String: String], _ key: String) -> Bool {
        guard let value = settings[key]?.lowercased() else { return false }
        return !["no", "false", "0", "off"].contains(value)
    }

    /// The setpriv(1) options that reproduce what `settings` do to an exec of a setuid program:
    /// no new privileges, and the capabilities dropped from the bounding set.
    static func setprivOptions(_ settings: [String: String], userUnit: Bool) -> [String] {
        var options: [String] = []
        let implied = userUnit && implyNoNewPrivilegesInUserUnits.contains { isOn(settings, $0) }
        if isOn(settings, "NoNewPrivileges") || implied { options.append("--no-new-privs") }
        var drop: [String] = []
        if isOn(settings, "ProtectKernelModules") { drop.append("-sys_module") }
        if isOn(settings, "ProtectKernelLogs") { drop.append("-syslog") }
        if isOn(settings, "ProtectClock") { drop += ["-sys_time", "-wake_alarm"] }
        if let set = settings["CapabilityBoundingSet"] {
            let names = set.replacingOccurrences(of: "~", with: "").split(separator: " ").map { $0.lowercased().replacingOccurrences(of: "cap_", with: "") }
            drop += set.hasPrefix("~") ? names.map { "-" + $0 } : ["-all"] + names.map { "+" + $0 }
        }
        if !drop.isEmpty { options.append("--bounding-set=" + drop.joined(separator: ",")) }
        return options
    }

    /// A directory of the test's own, 0755 (so that nobody can reach it), on a file system
    /// mounted without nosuid; removed by the caller.
    static func scratchDirectory() async throws -> String {
        for base in [NSTemporaryDirectory(), root + "/.build/"] {
            let options = await ChildProgram.run(["findmnt", "-n", "-o", "OPTIONS", "--target", base])
            guard options.status == 0, !options.stdout.split(separator: ",").contains(where: { $0.hasPrefix("nosuid") }) else { continue }
            let directory = base + "service-unit-\(UUID().uuidString.prefix(8))"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            chmod(directory, 0o755)
            return directory
        }
        throw Failure(description: "no directory on a file system without nosuid for the setuid helper")
    }

    struct Failure: Error, CustomStringConvertible { let description: String }

    /// What a setuid-root program saw: its effective uid, effective capabilities and NoNewPrivs.
    struct SetuidOutcome: CustomStringConvertible {
        let effectiveUID: String?
        let effectiveCapabilities: String?
        let noNewPrivileges: String?
        let output: String
        var description: String { output }
    }

    /// Runs a setuid-root copy of cat(1) (in `directory`) as nobody under `options`: it prints
    /// its own /proc/self/status.
    static func runSetuidCat(in directory: String, options: [String]) async throws -> SetuidOutcome {
        let helper = directory + "/setuid-cat"
        if !FileManager.default.fileExists(atPath: helper) {
            try FileManager.default.copyItem(atPath: "/bin/cat", toPath: helper)
            try #require(chown(helper, 0, 0) == 0, "chown: \(String(cString: strerror(errno)))")
            try #require(chmod(helper, 0o4755) == 0, "chmod: \(String(cString: strerror(errno)))")
        }
        let run = await ChildProgram.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + options + [helper, "/proc/self/status"], stderrToStdout: true)
        try #require(run.status == 0, "setpriv \(options) \(helper) failed: \(run.stdout)")
        func field(_ name: String) -> [Substring]? {
            run.stdout.split(separator: "\n").first { $0.hasPrefix(name + ":") }?.dropFirst(name.count + 1).split(separator: "\t")
        }
        return SetuidOutcome(
            effectiveUID: field("Uid").flatMap { $0.count > 1 ? String($0[1]) : nil },
            effectiveCapabilities: field("CapEff")?.first.map(String.init),
            noNewPrivileges: field("NoNewPrivs")?.first.map(String.init), output: run.stdout)
    }

    /// This process's bounding set (what a setuid-root program may get at most).
    static func ownBoundingSet() throws -> String {
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        let line = status.split(separator: "\n").first { $0.hasPrefix("CapBnd:") }
        return line.map { $0.dropFirst("CapBnd:".count).trimmingCharacters(in: .whitespaces) } ?? ""
    }

    /// Checks that a setuid-root program started as nobody under `unit`'s settings (as far as
    /// setpriv reproduces them) runs as root with every capability this process may hand on,
    /// as `sudo` would in the user's login. First, with --no-new-privs forced, that the check
    /// sees what NoNewPrivileges does (the setuid bit ignored).
    static func expectSetuidWorks(under unit: String, userUnit: Bool) async throws {
        try #require(getuid() == 0, "the setuid check runs as root")
        let directory = try await scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let control = try await runSetuidCat(in: directory, options: ["--no-new-privs"])
        try #require(control.effectiveUID == "65534" && control.noNewPrivileges == "1", "the control run: \(control)")

        let options = setprivOptions(serviceSettings(unit), userUnit: userUnit)
        let outcome = try await runSetuidCat(in: directory, options: options)
        #expect(outcome.effectiveUID == "0", "a setuid-root program under the unit's settings (setpriv \(options)) did not run as root:\n\(outcome)")
        #expect(outcome.noNewPrivileges == "0", "NoNewPrivs under the unit's settings (setpriv \(options))")
        #expect(outcome.effectiveCapabilities == (try ownBoundingSet()), "capabilities a setuid-root program gets under the unit's settings (setpriv \(options))")
    }

    /// `make install-files` with `variables` (and DESTDIR if given).
    static func make(_ variables: [String]) async -> ChildProgram.Outcome {
        await ChildProgram.run(["make", "--no-print-directory", "-C", root, "install-files"] + variables, stderrToStdout: true)
    }

    /// `systemd-analyze verify` of an installed unit; its output (empty when it has nothing
    /// to say) and status.
    static func verify(_ unit: String, arguments: [String] = [], environment: [String: String] = [:]) async -> ChildProgram.Outcome {
        await ChildProgram.run(["systemd-analyze", "verify"] + arguments + [unit], environment: environment, stderrToStdout: true)
    }

    @Test func noSettingTakesFromTheUsersCommands() throws {
        let settings = Self.serviceSettings(try String(contentsOfFile: Self.sourceUnit, encoding: .utf8))
        #expect(settings["ExecStart"] != nil, "the unit has a [Service] section with ExecStart")
        for (key, takes) in Self.childReaching {
            let value = settings[key]
            let harmless = value == nil || (key == "RestrictNamespaces" && ["no", "false", "0", "off"].contains(value!.lowercased()))
            #expect(harmless, "\(key)=\(value ?? "") reaches the user's commands: it takes \(takes)")
        }
    }

    @Test func aSetuidProgramStartedUnderTheSystemUnitRunsAsRoot() async throws {
        let destdir = NSTemporaryDirectory() + "service-unit-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: destdir) }
        let make = await Self.make(["DESTDIR=\(destdir)"])
        try #require(make.status == 0, "make install-files failed:\n\(make.stdout)")
        let unit = try String(contentsOfFile: destdir + "/usr/local/lib/systemd/system/workspace-agent.service", encoding: .utf8)
        try await Self.expectSetuidWorks(under: unit, userUnit: false)
    }

    /// The installed system unit, with a stand-in for the binary at the path ExecStart names:
    /// a tmpfs over that directory in a private mount namespace (nothing on the host changes);
    /// where there is none, only verify's complaint that the binary is missing is accepted.
    @Test func systemdAnalyzeVerifiesTheInstalledSystemUnit() async throws {
        let destdir = NSTemporaryDirectory() + "service-unit-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: destdir) }
        let make = await Self.make(["DESTDIR=\(destdir)"])
        try #require(make.status == 0, "make install-files failed:\n\(make.stdout)")
        let unit = destdir + "/usr/local/lib/systemd/system/workspace-agent.service"
        let execStart = try #require(Self.serviceSettings(try String(contentsOfFile: unit, encoding: .utf8))["ExecStart"])
        let binary = String(execStart.split(separator: " ")[0])
        #expect(binary == "/usr/local/bin/workspace-agent")
        let bindir = (binary as NSString).deletingLastPathComponent
        let privateMounts = await ChildProgram.run(["unshare", "--mount", "--propagation", "private", "true"])
        if privateMounts.status == 0 {
            let script = "mount -t tmpfs tmpfs \"$1\" && cp /bin/true \"$1/workspace-agent\" && exec systemd-analyze verify \"$2\""
            let verified = await ChildProgram.run(
                ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", bindir, unit], stderrToStdout: true)
            #expect(verified.status == 0 && verified.stdout.isEmpty, "systemd-analyze verify \(unit):\n\(verified.stdout)")
        } else {
            let verified = await Self.verify(unit)
            #expect(
                verified.stdout.split(separator: "\n") == ["workspace-agent.service: Command \(binary) is not executable: No such file or directory"],
                "systemd-analyze verify \(unit) (no private mount namespace here):\n\(verified.stdout)")
        }
    }

    @Test func installRefusesAUnitUserThatDoesNotExist() async throws {
        let scratch = NSTemporaryDirectory() + "service-unit-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let missing = "wa-no-user-\(UInt32.random(in: 0 ... .max))"
        let places = ["PREFIX=\(scratch)/p", "SYSCONFDIR=\(scratch)/etc", "LAYOUT=system"]

        let refused = await Self.make(places + ["AGENT_USER=\(missing)"])
        #expect(refused.status != 0, "make install-files with a missing AGENT_USER succeeded:\n\(refused.stdout)")
        #expect(refused.stdout.contains("no user '\(missing)'"), "\(refused.stdout)")
        #expect(refused.stdout.contains("AGENT_USER=name"), "the refusal says how to name another user:\n\(refused.stdout)")
        #expect(refused.stdout.contains("systemctl edit workspace-agent"), "the refusal names the drop-in:\n\(refused.stdout)")
        #expect(!FileManager.default.fileExists(atPath: scratch + "/p"), "make installed files although it refused")

        // Into a DESTDIR (a package, an image) the user need not exist here: a warning.
        let packaged = await Self.make(places + ["AGENT_USER=\(missing)", "DESTDIR=\(scratch)/destdir"])
        #expect(packaged.status == 0, "\(packaged.stdout)")
        #expect(packaged.stdout.contains("warning: no user '\(missing)'"), "\(packaged.stdout)")
        let packagedUnit = try String(contentsOfFile: "\(scratch)/destdir\(scratch)/p/lib/systemd/system/workspace-agent.service", encoding: .utf8)
        #expect(Self.serviceSettings(packagedUnit)["User"] == missing)

        // An existing user: the unit runs as it and its primary group.
        let group = await ChildProgram.run(["id", "-gn", "nobody"])
        let installed = await Self.make(places + ["AGENT_USER=nobody"])
        #expect(installed.status == 0, "\(installed.stdout)")
        #expect(installed.stdout.contains("systemctl edit workspace-agent"), "the install says how to run as another user:\n\(installed.stdout)")
        let settings = Self.serviceSettings(try String(contentsOfFile: scratch + "/p/lib/systemd/system/workspace-agent.service", encoding: .utf8))
        #expect(settings["User"] == "nobody")
        #expect(settings["Group"] == group.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(FileManager.default.fileExists(atPath: scratch + "/etc/workspace-agent.env"))
    }

    /// `make install PREFIX=$HOME/.local`: a user unit where `systemctl --user` finds it, the
    /// environment file in ~/.config, nothing under /etc; `systemd-analyze verify --user`
    /// accepts it, and a setuid program still gains root under it (a user unit's seccomp
    /// settings would imply NoNewPrivileges).
    @Test func aPrefixInTheHomeDirectoryInstallsAUserUnit() async throws {
        let scratch = NSTemporaryDirectory() + "service-unit-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let home = scratch + "/home"
        try FileManager.default.createDirectory(atPath: scratch + "/run", withIntermediateDirectories: true)
        chmod(scratch + "/run", 0o700)
        let make = await Self.make(["HOME=\(home)", "XDG_CONFIG_HOME=\(home)/.config", "PREFIX=\(home)/.local"])
        try #require(make.status == 0, "make install-files PREFIX=$HOME/.local failed:\n\(make.stdout)")
        // Every destination make names is quoted: none is under /etc.
        #expect(!make.stdout.contains("\"/etc"), "\(make.stdout)")
        #expect(make.stdout.contains("systemctl --user"), "the install says how to start a user unit:\n\(make.stdout)")

        let unitPath = home + "/.config/systemd/user/workspace-agent.service"
        let unit = try String(contentsOfFile: unitPath, encoding: .utf8)
        let settings = Self.serviceSettings(unit)
        #expect(settings["User"] == nil && settings["Group"] == nil, "a user unit runs as its user")
        #expect(settings["ExecStart"] == "\(home)/.local/bin/workspace-agent run")
        #expect(settings["EnvironmentFile"] == "-\(home)/.config/workspace-agent.env")
        #expect(!unit.contains("/etc/"), "the user unit names nothing under /etc")
        #expect(unit.contains("WantedBy=default.target"))
        #expect(!unit.contains("network-online.target"), "a user manager has no network-online.target")
        let mode = try? FileManager.default.attributesOfItem(atPath: home + "/.config/workspace-agent.env")[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(FileManager.default.fileExists(atPath: home + "/.local/share/doc/workspace-agent/README.md"))

        // A stand-in binary where ExecStart names it (in the test's own directory).
        try FileManager.default.createDirectory(atPath: home + "/.local/bin", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: "/bin/true", toPath: home + "/.local/bin/workspace-agent")
        let verified = await Self.verify(
            unitPath, arguments: ["--user"], environment: ["HOME": home, "XDG_CONFIG_HOME": home + "/.config", "XDG_RUNTIME_DIR": scratch + "/run"])
        #expect(verified.status == 0 && verified.stdout.isEmpty, "systemd-analyze verify --user \(unitPath):\n\(verified.stdout)")

        try await Self.expectSetuidWorks(under: unit, userUnit: true)
    }
}

/// `make run`'s build step, with a stand-in for `swift` (a script that records its calls,
/// prints the dependency warnings SwiftPM prints, and writes a stand-in binary) in a scratch
/// directory of the test's own: the first run builds and starts the binary; a second with no
/// change starts it without calling swift; a changed or added source file builds again; a
/// failed build starts nothing and is retried by the next run; the swift-distributed-tracing
/// warnings are left out, other output is kept.
@Suite(.timeLimit(.minutes(2)))
struct MakeRunTests {
    static let makefile = DocExamples.repositoryRoot.path + "/Makefile"

    @Test func aRunWithNothingChangedStartsTheBuiltBinaryWithoutBuilding() async throws {
        let scratch = NSTemporaryDirectory() + "make-run-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        try FileManager.default.createDirectory(atPath: scratch + "/Sources/Agent", withIntermediateDirectories: true)
        try TestFile.write(scratch + "/Package.swift", "// swift-tools-version:6.0\n")
        try TestFile.write(scratch + "/Sources/Agent/main.swift", "print(1)\n")
        let swift = scratch + "/fake-swift"
        try TestFile.write(
            swift,
            """
            #!/bin/sh
            echo "$*" >> "\(scratch)/swift-calls"
            [ -e "\(scratch)/fail" ] && { echo "error: the build failed"; exit 1; }
            echo "warning: 'swift-distributed-tracing': found 1 file(s) which are unhandled; explicitly declare them as resources or exclude from the target"
            echo "    $PWD/.build/checkouts/swift-distributed-tracing/Sources/Tracing/CMakeLists.txt"
            echo "Building for production..."
            mkdir -p .build/release
            printf '#!/bin/sh\\necho "agent ran: $*"\\n' > .build/release/workspace-agent
            chmod 755 .build/release/workspace-agent
            echo "Build of product 'workspace-agent' complete!"

            """)
        chmod(swift, 0o755)
        func run() async -> (ChildProgram.Outcome, calls: Int) {
            let outcome = await ChildProgram.run(
                ["make", "--no-print-directory", "-f", Self.makefile, "run", "SWIFT=\(swift)", "DEB_PACKAGES=", "RUN_ARGS=--version"],
                directory: scratch, stderrToStdout: true)
            let calls = (try? String(contentsOfFile: scratch + "/swift-calls", encoding: .utf8))?.split(separator: "\n").count ?? 0
            return (outcome, calls)
        }

        let (first, firstCalls) = await run()
        #expect(first.status == 0 && first.stdout.contains("agent ran: --version"), "\(first.stdout)")
        #expect(firstCalls == 1)
        #expect(first.stdout.contains("Build of product 'workspace-agent' complete!"), "the build's own output is kept:\n\(first.stdout)")
        #expect(!first.stdout.contains("swift-distributed-tracing"), "the dependency's warnings are left out:\n\(first.stdout)")

        let (second, secondCalls) = await run()
        #expect(second.status == 0 && second.stdout.contains("agent ran: --version"), "\(second.stdout)")
        #expect(secondCalls == 1, "nothing changed, yet swift was called again:\n\(second.stdout)")

        try TestFile.write(scratch + "/Sources/Agent/main.swift", "print(2)\n")
        let (changed, changedCalls) = await run()
        #expect(changed.status == 0 && changedCalls == 2, "a changed source file was not built:\n\(changed.stdout)")

        try TestFile.write(scratch + "/Sources/Agent/Added.swift", "let added = 1\n")
        try TestFile.write(scratch + "/fail", "")
        let (failed, failedCalls) = await run()
        #expect(failed.status != 0 && failedCalls == 3, "\(failed.stdout)")
        #expect(failed.stdout.contains("error: the build failed"), "\(failed.stdout)")
        #expect(!failed.stdout.contains("agent ran"), "a failed build started the old binary:\n\(failed.stdout)")

        try FileManager.default.removeItem(atPath: scratch + "/fail")
        let (retried, retriedCalls) = await run()
        #expect(retried.status == 0 && retriedCalls == 4, "the run after a failed build did not build:\n\(retried.stdout)")
        let (again, againCalls) = await run()
        #expect(again.status == 0 && againCalls == 4, "\(again.stdout)")
    }
}
