import AgentCore
import AgentHTTP
import AgentTestSupport
import Foundation
import Testing

@testable import Desktop

/// A desktop module over a real server, its Xvnc, and X clients run against its display.
struct DesktopHarness {
    let module: DesktopModule
    let client: RawHTTPClient
    let port: Int
    /// The module's state directory (the desktop keeps Xvnc's logs under it).
    let state: String

    /// Serves a fresh desktop module (its own Xvnc), with `environment` for its children.
    static func with(
        environment: [String: String] = ProcessInfo.processInfo.environment, configuration: DesktopOptions.Configuration = .init(),
        _ body: (DesktopHarness) async throws -> Void
    ) async throws {
        let state = NSTemporaryDirectory() + "desktop-test-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: state) }
        let module = DesktopModule(configuration: configuration, context: .forTests(environment: environment, stateDirectory: state))
        do {
            try await withAgentServer([HTTPMount(module, at: "/api/v0/desktop")]) { port in
                try await body(DesktopHarness(module: module, client: RawHTTPClient(port: port), port: port, state: state))
            }
        } catch {
            await module.supervisor.close()
            throw error
        }
        await module.supervisor.close()
    }

    /// POST /action; the status and the JSON object answered.
    func action(_ json: String) async throws -> (status: Int, body: [String: Any]) {
        let response = try await client.request("POST", "/api/v0/desktop/action", json: json)
        return (response.status, (try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]) ?? [:])
    }

    /// Runs an X client against the desktop's display; its standard output.
    func x(_ arguments: [String]) async throws -> String {
        let display = try await module.supervisor.ensureStarted().display
        return await Self.run(arguments, environment: ["DISPLAY": ":\(display)"])
    }

    static func run(_ arguments: [String], environment: [String: String] = [:], input: String? = nil) async -> String {
        await ChildProgram.run(arguments, environment: environment, input: input).stdout
    }

    /// The RGB of pixel (`x`, `y`) of a base64 PNG, decoded by Python's zlib (independent
    /// of the agent's encoder), with the image's size; nothing (a size of 0) unless every
    /// chunk's CRC holds and the image data is exactly its rows.
    static func pixel(_ base64: String, x: Int, y: Int) async -> (width: Int, height: Int, rgb: [Int]) {
        let script = """
            import base64, struct, sys, zlib
            png = base64.b64decode(sys.stdin.read())
            assert png[:8] == b'\\x89PNG\\r\\n\\x1a\\n'
            pos, idat, w, h = 8, b'', 0, 0
            while pos < len(png):
                n, kind = struct.unpack('>I4s', png[pos:pos+8]); data = png[pos+8:pos+8+n]
                assert zlib.crc32(kind + data) == struct.unpack('>I', png[pos+8+n:pos+12+n])[0]; pos += 12 + n
                if kind == b'IHDR': w, h, depth, color = struct.unpack('>IIBB', data[:10]); assert (depth, color) == (8, 2)
                if kind == b'IDAT': idat += data
            raw, stride = zlib.decompress(idat), w * 3
            assert len(raw) == h * (stride + 1)
            x, y = int(sys.argv[1]), int(sys.argv[2])
            def unfilter(r, prev):
                f, line = raw[r*(stride+1)], bytearray(raw[r*(stride+1)+1:(r+1)*(stride+1)])
                for i in range(stride):
                    a = line[i-3] if i >= 3 else 0; b = prev[i]; c = prev[i-3] if i >= 3 else 0
                    if f == 1: line[i] = (line[i] + a) & 255
                    elif f == 2: line[i] = (line[i] + b) & 255
                    elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
                    elif f == 4:
                        p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                        line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
                return line
            if raw[y*(stride+1)] in (0, 1):
                row = unfilter(y, bytearray(stride))  # None and Sub need only the row itself
            else:
                row = bytearray(stride)
                for r in range(y + 1): row = unfilter(r, row)
            print(w, h, *row[x*3:x*3+3])
            """
        let out = await run(["python3", "-c", script, "\(x)", "\(y)"], input: base64)
        let numbers = out.split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { Int($0) }
        guard numbers.count == 5 else { return (0, 0, []) }
        return (numbers[0], numbers[1], Array(numbers[2...]))
    }
}

extension DesktopHarness {
    /// Runs `xev` (a 400×300 window at the top left, reporting `events` only, for at most
    /// `seconds`) on the desktop while `body` runs, and gives `body` the file it logs to.
    func watchingXEvents(_ events: String, seconds: Int, _ body: (_ log: String) async throws -> Void) async throws {
        let display = try await module.supervisor.ensureStarted().display
        let log = NSTemporaryDirectory() + "xev-\(UUID().uuidString.prefix(8)).log"
        defer { try? FileManager.default.removeItem(atPath: log) }
        let xev = Task {
            await DesktopHarness.run(
                ["sh", "-c", "exec timeout \(seconds) xev -geometry 400x300+0+0 -event \(events) > \(log)"], environment: ["DISPLAY": ":\(display)"])
        }
        defer { xev.cancel() }
        #expect(await eventually { (try? await x(["xdotool", "search", "--onlyvisible", "--name", "Event Tester"]))?.isEmpty == false })
        try await body(log)
    }
}
