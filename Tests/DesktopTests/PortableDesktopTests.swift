import AgentTestSupport
import Foundation
import Testing

@testable import Desktop

/// portabledesktop preferred when present (a stub with the real CLI's shapes that runs a real
/// Xvnc), its output checks, its recordings, and how the binary is found.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct PortableDesktopTests {
    static let stub = #"""
        #!/bin/sh
        dir="$(dirname "$0")"
        echo "$*" >> "$dir/calls"
        case "$1" in
        up)
          if [ -n "$STUB_PRINT" ]; then echo $$ > "$dir/up.pid"; echo "$STUB_PRINT"; exec sleep 30; fi
          geometry="$4"
          d=40; while [ -e /tmp/.X$d-lock ] || [ -e /tmp/.X11-unix/X$d ]; do d=$((d+1)); done
          port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
          setsid Xvnc :$d -rfbport $port -localhost -interface 127.0.0.1 -SecurityTypes None -AlwaysShared \
            -BlacklistThreshold 1000000 -geometry "$geometry" -depth 24 >/dev/null 2>&1 </dev/null &
          echo $! > "$dir/xvnc.pid"
          i=0
          while [ $i -lt 200 ] && ! grep -q "$(printf ':%04X 00000000:0000 0A' $port)" /proc/net/tcp; do sleep 0.05; i=$((i+1)); done
          echo "starting up" >&2
          printf '{"vncPort":%s,"geometry":"%s","xvncPid":%s,"display":%s}\n' $port "$geometry" "$(cat "$dir/xvnc.pid")" $d
          ;;
        down) kill "$(cat "$dir/xvnc.pid")" 2>/dev/null; echo stopped ;;
        record)
          shift; thumb=""; out=""
          while [ $# -gt 0 ]; do case "$1" in --thumbnail) thumb="$2"; shift 2;; --*) shift 2;; *) out="$1"; shift;; esac; done
          # STUB_RECORD_LINGER: seconds it takes to finish after SIGINT.
          trap 'sleep "${STUB_RECORD_LINGER:-0}"; printf "fake mp4 data" > "$out"; printf "fake jpeg" > "$thumb"; exit 0' INT
          # The test waits for this before it stops the recording (a SIGINT before the trap
          # would end the stub without its files).
          touch "$dir/$(basename "$out").ready"
          while :; do sleep 0.05; done
          ;;
        esac
        """#

    /// The stub's recorder for `id` has set its SIGINT trap (it touched its marker).
    static func recorderReady(_ stubDirectory: String, _ id: String) async -> Bool {
        await eventually(timeout: .seconds(30)) {
            FileManager.default.fileExists(atPath: "\(stubDirectory)/coder-recording-\(id).mp4.ready")
        }
    }

    /// A directory holding the stub as `portabledesktop`, and an environment finding it first.
    static func stubDirectory(extra: [String: String] = [:]) throws -> (directory: String, environment: [String: String]) {
        let directory = NSTemporaryDirectory() + "portabledesktop-stub-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try TestFile.write(directory + "/portabledesktop", stub.utf8)
        chmod(directory + "/portabledesktop", 0o755)
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = directory + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        for (key, value) in extra { environment[key] = value }
        return (directory, environment)
    }

    @Test func portableDesktopRunsTheDesktopAndDownStopsIt() async throws {
        let (directory, environment) = try Self.stubDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await DesktopHarness.with(environment: environment) { desktop in
            let info = try await desktop.module.supervisor.ensureStarted()
            // The display its state reports (the stub's are from 40); the reference keeps -1,
            // the agent reads the X server (screenshots, cursor_position) and passes DISPLAY on.
            #expect(info.display >= 40 && info.width == 1920 && info.height == 1080)
            let shot = try await desktop.action(#"{"action":"screenshot","scaled_width":64,"scaled_height":36}"#)
            #expect(shot.status == 200 && shot.body["screenshot_width"] as? Int == 64)
            let click = try await desktop.action(#"{"action":"left_click","coordinate":[10,20]}"#)
            #expect(click.status == 200)
            #expect(try await desktop.action(#"{"action":"cursor_position"}"#).body["output"] as? String == "x=10,y=20")
            let xvnc = try #require(Int32(try String(contentsOfFile: directory + "/xvnc.pid", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
            // A state without `display` falls back to its Xvnc's command line.
            #expect(PortableDesktopLauncher.display(ofXServer: xvnc) == info.display)
            await desktop.module.supervisor.close()
            let calls = try String(contentsOfFile: directory + "/calls", encoding: .utf8)
            #expect(calls.hasPrefix("up --json --geometry 1920x1080\n") && calls.contains("down\n"))
            #expect(await eventually { kill(xvnc, 0) != 0 }, "down stopped its Xvnc")
        }
    }

    /// A port that is not a TCP port or undecodable output fails the start, and the child is
    /// killed (a port past 65535 had reached the socket address that traps on it).
    @Test(arguments: [
        (#"{"vncPort":0,"geometry":"1920x1080"}"#, "portabledesktop returned port 0"),
        (#"{"vncPort":70000,"geometry":"1920x1080"}"#, "portabledesktop returned port 70000"),
        (#"{"vncPort":-5,"geometry":"1920x1080"}"#, "portabledesktop returned port -5"),
        ("not json at all", "parse portabledesktop output"),
    ])
    func badOutputFailsTheStart(output: (String, String)) async throws {
        let (directory, environment) = try Self.stubDirectory(extra: ["STUB_PRINT": output.0])
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let supervisor = DesktopSupervisor(configuration: .init(environment: environment, stateDirectory: directory))
        do {
            _ = try await supervisor.ensureStarted()
            Issue.record("started")
        } catch {
            #expect(error.description.hasPrefix(output.1))
        }
        let up = try #require(Int32(try String(contentsOfFile: directory + "/up.pid", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(await eventually { kill(up, 0) != 0 }, "the up process was stopped")
        await supervisor.close()
    }

    @Test func recordings() async throws {
        let (directory, environment) = try Self.stubDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await DesktopHarness.with(environment: environment) { desktop in
            func post(_ path: String, _ json: String) async throws -> RawHTTPClient.Response {
                try await desktop.client.request("POST", "/api/v0/desktop/recording/\(path)", json: json)
            }
            func message(_ response: RawHTTPClient.Response) -> String? {
                (try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])?["message"] as? String
            }
            let id = "5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b"
            #expect(message(try await post("start", "nope")) == "Failed to decode request body.")
            #expect(message(try await post("start", "{}")) == "Missing recording_id.")
            #expect(message(try await post("start", #"{"recording_id":"abc"}"#)) == "Invalid recording_id format.")
            let started = try await post("start", #"{"recording_id":"\#(id)"}"#)
            #expect(started.status == 200 && message(started) == "Recording started.")
            #expect(try await post("start", #"{"recording_id":"\#(id)"}"#).status == 200, "idempotent while active")
            let unknown = try await post("stop", #"{"recording_id":"00000000-0000-4000-8000-000000000001"}"#)
            #expect(unknown.status == 404 && message(unknown) == "Recording not found.")
            #expect(await Self.recorderReady(directory, id))
            let stopped = try await post("stop", #"{"recording_id":"\#(id)"}"#)
            #expect(stopped.status == 200)
            #expect(stopped.headers.first { $0.0.lowercased() == "content-type" }?.1.hasPrefix("multipart/mixed; boundary=") == true)
            let body = String(decoding: stopped.body, as: UTF8.self)
            #expect(body.contains("Content-Type: video/mp4\r\n\r\nfake mp4 data\r\n"))
            #expect(body.contains("Content-Type: image/jpeg\r\n\r\nfake jpeg\r\n"))

            // At most five at once.
            for index in 0..<5 {
                #expect(try await post("start", #"{"recording_id":"5e6f7a8b-9c0d-4e1f-8a2b-00000000000\#(index)"}"#).status == 200)
            }
            let sixth = try await post("start", #"{"recording_id":"5e6f7a8b-9c0d-4e1f-8a2b-000000000009"}"#)
            #expect(sixth.status == 500 && message(sixth) == "Failed to start recording.")

            await desktop.module.recorder.close()
            #expect(try await post("start", #"{"recording_id":"\#(id)"}"#).status == 503)
        }
    }

    /// A stop forgets its recording whatever the outcome (its files are sent and deleted, so
    /// a second stop is 404), and recordings that finished without a stop (idle) are kept
    /// only up to ``Recorder/maxFinishedKept``, the oldest forgotten with their files. Before,
    /// every id stayed in memory, and its files on disk, until shutdown.
    @Test func stoppedAndUnfetchedRecordingsAreForgotten() async throws {
        let (directory, environment) = try Self.stubDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await DesktopHarness.with(environment: environment) { desktop throws in
            let recorder = desktop.module.recorder
            func post(_ path: String, _ id: String) async throws -> Int {
                try await desktop.client.request("POST", "/api/v0/desktop/recording/\(path)", json: #"{"recording_id":"\#(id)"}"#).status
            }
            let id = "6a7b8c9d-0e1f-4a2b-8c3d-4e5f6a7b8c9d"
            #expect(try await post("start", id) == 200)
            let recordings = try #require(await recorder.directory)
            func video(_ id: String) -> String { "\(recordings)/coder-recording-\(id).mp4" }
            #expect(await Self.recorderReady(directory, id))
            #expect(try await post("stop", id) == 200)
            #expect(await recorder.count == 0)
            #expect(await eventually { !FileManager.default.fileExists(atPath: video(id)) }, "sent, then deleted")
            #expect(try await post("stop", id) == 404)

            let ids = (0..<(Recorder.maxFinishedKept + 3)).map { String(format: "6a7b8c9d-0e1f-4a2b-8c3d-%012d", $0) }
            for id in ids {
                #expect(try await post("start", id) == 200)
                #expect(await Self.recorderReady(directory, id))
                // As 10 minutes after its start without an action: SIGINT, the files stay for a stop.
                let later = ContinuousClock.now + Recorder.idleStop + .seconds(1)
                await recorder.stopIdle(lastActivity: .now, now: later)
                #expect(await eventually { await recorder.runningCount == 0 })
            }
            #expect(await recorder.count == Recorder.maxFinishedKept)
            for id in ids.prefix(3) { #expect(!FileManager.default.fileExists(atPath: video(id)), "forgotten: \(id)") }
            for id in ids.dropFirst(3) { #expect(FileManager.default.fileExists(atPath: video(id)), "kept: \(id)") }
            #expect(try await post("stop", ids[0]) == 404)
            #expect(try await post("stop", ids.last!) == 200)
            await recorder.close()
            // The last stop's files are deleted once its answer is sent, which may finish
            // after the client has read it (seen on a loaded machine).
            #expect(await eventually { ids.allSatisfy { !FileManager.default.fileExists(atPath: video($0)) } })
        }
    }

    /// The recorder writes in a directory of the agent's own (0700), never at the names in
    /// `$TMPDIR` itself: a link another user planted there is neither written through nor
    /// unlinked, and the directory goes at shutdown. Before, the files were
    /// `$TMPDIR/coder-recording-<id>.mp4`, whose planted link the start unlinked (and could
    /// lose the race to a new one).
    @Test func recordingsAreWrittenInADirectoryOfTheAgentsOwn() async throws {
        let (directory, environment) = try Self.stubDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let id = "7b8c9d0e-1f2a-4b3c-8d4e-5f6a7b8c9d0e"
        let victim = directory + "/victim"
        try TestFile.write(victim, "precious".utf8)
        let planted = NSTemporaryDirectory() + "coder-recording-\(id).mp4"
        #expect(symlink(victim, planted) == 0)
        defer { unlink(planted) }
        try await DesktopHarness.with(environment: environment) { desktop in
            #expect(try await Self.recording(desktop, "start", id).status == 200)
            let recordings = try #require(await desktop.module.recorder.directory)
            var info = stat()
            #expect(lstat(recordings, &info) == 0 && info.st_mode & 0o7777 == 0o700 && info.st_uid == geteuid())
            #expect((recordings as NSString).deletingLastPathComponent == (NSTemporaryDirectory() as NSString).standardizingPath)
            #expect(await Self.recorderReady(directory, id))
            let stopped = try await Self.recording(desktop, "stop", id)
            #expect(stopped.status == 200 && String(decoding: stopped.body, as: UTF8.self).contains("fake mp4 data"))
            var link = stat()
            #expect(lstat(planted, &link) == 0 && link.st_mode & S_IFMT == S_IFLNK, "the planted link is not the agent's")
            #expect(try String(contentsOfFile: victim, encoding: .utf8) == "precious")
            await desktop.module.recorder.close()
            #expect(await eventually { !FileManager.default.fileExists(atPath: recordings) }, "removed at shutdown")
        }
    }

    /// POST `…/recording/<path>` for `id`.
    static func recording(_ desktop: DesktopHarness, _ path: String, _ id: String) async throws -> RawHTTPClient.Response {
        try await desktop.client.request("POST", "/api/v0/desktop/recording/\(path)", json: #"{"recording_id":"\#(id)"}"#)
    }

    /// Starting a recording is activity (as the reference's start records it), and a running
    /// recording keeps the desktop up past its idle timeout; once stopped, the idle desktop
    /// stops. Before, a start recorded nothing (on a desktop idle for 10 minutes, the next
    /// idle pass stopped the recording within 5 s) and the desktop's idle stop ignored
    /// recordings.
    @Test func aRecordingIsActivityAndKeepsTheDesktopUp() async throws {
        let (directory, environment) = try Self.stubDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await DesktopHarness.with(environment: environment, configuration: .init(idleTimeout: .milliseconds(1))) { desktop in
            let supervisor = desktop.module.supervisor
            let recorder = desktop.module.recorder
            let id = "7b8c9d0e-1f2a-4b3c-8d4e-5f6a7b8c9d0e"
            _ = try await supervisor.ensureStarted()
            let before = ContinuousClock.now
            #expect(try await Self.recording(desktop, "start", id).status == 200)
            #expect(await supervisor.lastActivityInstant >= before, "the start is activity")
            #expect(await Self.recorderReady(directory, id))
            // Idle for longer than the desktop's timeout (1 ms): the recording keeps it.
            #expect(
                await eventually {
                    let last = await supervisor.lastActivityInstant
                    return ContinuousClock.now - last > .milliseconds(50)
                })
            await desktop.module.idleWatchPass()
            #expect(await supervisor.status() != nil, "the desktop runs while it is recorded")
            #expect(await recorder.runningCount == 1, "the recording runs")
            // Stopped, it no longer holds the desktop: the next pass stops the idle desktop.
            #expect(try await Self.recording(desktop, "stop", id).status == 200)
            await desktop.module.idleWatchPass()
            #expect(await supervisor.status() == nil, "stopped once idle with no recording")
            await recorder.close()
        }
    }

    /// Calls for one recording id do not interleave: of two stops at once, one answers the
    /// whole recording and the other 404; three starts at once run one recorder; and six
    /// starts of other ids at once run five (the limit) and refuse one. Before, both stops
    /// sent SIGINT and answered from the same files (one cut short once the other deleted
    /// them), each start spawned a recorder (all but the last one leaked), and every start
    /// passed the limit's check before any recorder was spawned.
    @Test func callsForOneRecordingDoNotInterleave() async throws {
        // The recorder takes 2 s to finish after SIGINT: the second stop comes meanwhile.
        let (directory, environment) = try Self.stubDirectory(extra: ["STUB_RECORD_LINGER": "2"])
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await DesktopHarness.with(environment: environment) { desktop in
            let recorder = desktop.module.recorder
            func recorders(_ id: String) async -> [Int32] {
                let pids = await DesktopHarness.run(["pgrep", "-f", "coder-recording-\(id).mp4"]).split(separator: "\n").compactMap { Int32($0) }
                // A stub's own forks (its `sleep`, its `$(basename …)`) carry its command line
                // until they exec: each stub is counted once, not with a fork caught mid-way
                // (a loaded run counted six for five).
                func parent(_ pid: Int32) -> Int32? {
                    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let end = stat.lastIndex(of: ")") else {
                        return nil
                    }
                    let fields = stat[stat.index(after: end)...].split(separator: " ")
                    return fields.count > 1 ? Int32(fields[1]) : nil
                }
                return pids.filter { pid in parent(pid).map { !pids.contains($0) } ?? false }
            }
            let id = "8c9d0e1f-2a3b-4c4d-9e5f-6a7b8c9d0e1f"
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<3 { group.addTask { try? await recorder.start(id: id) } }
            }
            // Each start has returned: every recorder it spawned runs by now.
            let spawned = await recorders(id)
            #expect(spawned.count == 1, "one recorder for the id: \(spawned)")
            #expect(await Self.recorderReady(directory, id))

            async let first = Self.recording(desktop, "stop", id)
            async let second = Self.recording(desktop, "stop", id)
            let answers = try await [first, second]
            #expect(answers.map(\.status).sorted() == [200, 404], "\(answers.map(\.status))")
            if let sent = answers.first(where: { $0.status == 200 }) {
                let body = sent.bodyText
                #expect(body.contains("Content-Type: video/mp4\r\n\r\nfake mp4 data\r\n"), "\(body)")
                #expect(body.contains("Content-Type: image/jpeg\r\n\r\nfake jpeg\r\n") && body.hasSuffix("--\r\n"), "\(body)")
            }

            let ids = (0..<6).map { String(format: "8c9d0e1f-2a3b-4c4d-9e5f-%012d", $0) }
            let refused = await withTaskGroup(of: Bool.self) { group in
                for each in ids {
                    group.addTask {
                        do {
                            try await recorder.start(id: each)
                            return false
                        } catch {
                            return true
                        }
                    }
                }
                var count = 0
                for await wasRefused in group where wasRefused { count += 1 }
                return count
            }
            #expect(refused == 1)
            #expect(await recorder.runningCount == Recorder.maxActive)
            var running = 0
            for each in ids { running += await recorders(each).count }
            #expect(running == Recorder.maxActive, "recorders running")
            await recorder.close()
            // Recorders the recorder does not know of (leaked) are ended here.
            for each in [id] + ids {
                for pid in await recorders(each) { kill(pid, SIGKILL) }
            }
        }
    }

    /// A recording needs a desktop portabledesktop runs: with the agent's own Xvnc running
    /// (started before portabledesktop was found), a start is 501 and runs no recorder.
    /// Before, only the binary was looked for, and `portabledesktop record` ran beside Xvnc.
    @Test func noRecordingOfTheAgentsOwnXvnc() async throws {
        let directory = NSTemporaryDirectory() + "portabledesktop-later-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = directory + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        try await DesktopHarness.with(environment: environment) { desktop in
            let supervisor = desktop.module.supervisor
            // No portabledesktop yet: the agent's own Xvnc runs the desktop.
            #expect(try await supervisor.ensureStarted().display >= 10)
            #expect(await supervisor.runningPortableDesktopBinary() == nil)
            // portabledesktop arrives (as a start-up script installs it) while Xvnc runs.
            try TestFile.write(directory + "/portabledesktop", Self.stub.utf8)
            chmod(directory + "/portabledesktop", 0o755)
            #expect(await supervisor.portableDesktopBinary() == directory + "/portabledesktop")
            let started = try await Self.recording(desktop, "start", "9d0e1f2a-3b4c-4d5e-8f6a-7b8c9d0e1f2a")
            #expect(started.status == 501, "\(started)")
            let body = (try? JSONSerialization.jsonObject(with: Data(started.body)) as? [String: Any]) ?? [:]
            #expect(body["message"] as? String == "Desktop recording requires portabledesktop.")
            #expect((body["detail"] as? String)?.contains("own Xvnc") == true, "\(body)")
            let calls = (try? String(contentsOfFile: directory + "/calls", encoding: .utf8)) ?? ""
            #expect(!calls.contains("record"), "no recorder ran: \(calls)")
            await desktop.module.recorder.close()
        }
    }

    /// PATH first; a script-bin file without an execute bit is not found.
    @Test func binaryLookup() throws {
        let bin = NSTemporaryDirectory() + "script-bin-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: bin) }
        try TestFile.write(bin + "/portabledesktop", "#!/bin/sh\n".utf8)
        chmod(bin + "/portabledesktop", 0o644)
        #expect(DesktopBinaries.portableDesktop(["PATH": "/nonexistent", "CODER_SCRIPT_BIN_DIR": bin]) == nil)
        chmod(bin + "/portabledesktop", 0o744)
        #expect(DesktopBinaries.portableDesktop(["PATH": "/nonexistent", "CODER_SCRIPT_BIN_DIR": bin]) == bin + "/portabledesktop")
        let (directory, environment) = try Self.stubDirectory(extra: ["CODER_SCRIPT_BIN_DIR": bin])
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(DesktopBinaries.portableDesktop(environment) == directory + "/portabledesktop", "PATH first")
    }
}
