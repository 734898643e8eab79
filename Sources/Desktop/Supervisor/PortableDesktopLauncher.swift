import AgentCore
import Dispatch
import FoundationEssentials
import Glibc
import NIOPosix

/// Runs coder/portabledesktop: `up --json --geometry WxH`, reads the
/// first JSON value it prints (`vncPort`, `geometry`, `xvncPid`, `display`), and `down` to
/// stop it.
struct PortableDesktopLauncher: DesktopLauncher {
    let binary: String
    let width: Int
    let height: Int
    let environment: [String: String]

    var summary: String { "portabledesktop at \(binary)" }

    /// `up` must print its state within this long.
    static let startTimeout: Duration = .seconds(60)
    /// Its output is read up to this many bytes (the state object is a few hundred).
    static let maxOutput = 64 << 10

    func start() async throws(DesktopError) -> any RunningDesktop {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw DesktopError("pipe: \(String(cString: strerror(errno)))") }
        // Only standard output carries the state; what it says on standard error is dropped.
        let quiet = open("/dev/null", O_WRONLY | O_CLOEXEC)
        defer { if quiet >= 0 { close(quiet) } }
        let child: SupervisedChild
        do {
            child = try await SupervisedChild.spawn(
                [binary, "up", "--json", "--geometry", "\(width)x\(height)"], environment: environment, outputFD: fds[1], errorFD: quiet)
        } catch {
            close(fds[0])
            close(fds[1])
            throw DesktopError("cannot run portabledesktop: \(error)")
        }
        close(fds[1])
        let reader = fds[0]
        let timeoutMs = Int32(Self.startTimeout.components.seconds * 1000)
        let output = (try? await NIOThreadPool.singleton.runIfActive { Self.readFirstJSON(reader, timeoutMs: timeoutMs) }) ?? nil
        close(reader)
        guard let output, let object = try? JSONValue.parseFirst(output), case .object = object else {
            await child.stop()
            throw DesktopError("parse portabledesktop output: no JSON object on its standard output")
        }
        let port = object["vncPort"]?.intValue ?? 0
        // A TCP port: anything else would trap where it becomes a socket address.
        guard (1...65535).contains(port) else {
            await child.stop()
            throw DesktopError("portabledesktop returned port \(port)")
        }
        var size = (width: 0, height: 0)
        if let geometry = object["geometry"]?.stringValue {
            let parts = geometry.split(separator: "x").compactMap { Int($0) }
            if parts.count == 2, parts.allSatisfy({ (1...DesktopLimits.maxSide).contains($0) }) { size = (parts[0], parts[1]) }
        }
        let xvncPid = object["xvncPid"]?.intValue.flatMap { Int32(exactly: $0) }
        // The reference reports -1; the agent reads the X server itself (screenshots,
        // cursor_position) and gives processes its DISPLAY, so it keeps the number: from the
        // state (`display`), else from its Xvnc's command line (`Xvnc :N ...`).
        var display = object["display"]?.intValue ?? -1
        if !(0...65535).contains(display) { display = xvncPid.flatMap(Self.display(ofXServer:)) ?? -1 }
        let info = DesktopInfo(vncPort: port, width: size.width, height: size.height, display: display)
        return PortableDesktop(binary: binary, environment: environment, info: info, up: child, xvncPid: xvncPid)
    }

    /// The display an X server process serves: its first `:N` argument (/proc/<pid>/cmdline).
    static func display(ofXServer pid: Int32) -> Int? {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return nil }
        for argument in data.split(separator: 0) where argument.first == UInt8(ascii: ":") {
            if let number = Int(String(decoding: argument.dropFirst(), as: UTF8.self)), (0...65535).contains(number) { return number }
        }
        return nil
    }

    /// Bytes of the first top-level JSON object in the stream (whitespace before it only), or
    /// nil for anything else, at EOF, timeout or past ``maxOutput``.
    static func readFirstJSON(_ fd: Int32, timeoutMs: Int32) -> [UInt8]? {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(timeoutMs) * 1_000_000
        while bytes.count < maxOutput {
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < deadline else { return nil }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, Int32((deadline - now) / 1_000_000) + 1) > 0 else { return nil }
            let n = read(fd, &buffer, buffer.count)
            guard n > 0 else { return nil }
            bytes += buffer[0..<n]
            // As Go's decoder: the first value must be an object; text is an error at once.
            guard let start = bytes.firstIndex(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }) else { continue }
            guard bytes[start] == UInt8(ascii: "{") else { return nil }
            if let end = JSONValue.endOfFirstValue(in: bytes[start...]) { return Array(bytes[start..<(start + end)]) }
        }
        return nil
    }
}

/// A desktop portabledesktop runs (detached: its Xvnc is not our child).
struct PortableDesktop: RunningDesktop {
    let binary: String
    let environment: [String: String]
    let info: DesktopInfo
    /// The `up` process (it exits once the desktop is up, unless run in the foreground).
    let up: SupervisedChild
    let xvncPid: Int32?

    /// Its Xvnc still exists (checked without signalling it) and its port listens.
    var isAlive: Bool {
        if let xvncPid, kill(xvncPid, 0) != 0 && errno == ESRCH { return false }
        return LoopbackProbe.isListening(port: info.vncPort)
    }

    /// `portabledesktop down` (its own teardown), bounded; then the `up` process if it still runs.
    func stop() async {
        let quiet = open("/dev/null", O_WRONLY | O_CLOEXEC)
        if let down = try? await SupervisedChild.spawn([binary, "down"], environment: environment, outputFD: quiet) {
            if !(await down.waitForExit(timeout: .seconds(10))) { await down.stop(grace: .seconds(1)) }
        }
        if quiet >= 0 { close(quiet) }
        await up.stop(grace: .seconds(3))
    }
}
