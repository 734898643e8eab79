import AgentCore
import Testing

@testable import Desktop

/// The desktop's flags, resolved as the run command resolves them.
struct DesktopOptionsTests {
    static func resolve(geometry: String?, environment: [String: String] = [:]) throws -> DesktopOptions.Configuration {
        var options = DesktopOptions()
        options.desktopIdleTimeout = nil
        options.desktopGeometry = geometry
        return try options.resolve(Settings(environment: environment))
    }

    /// A geometry past the screenshot's cap (33 177 600 pixels, as 7680×4320) is refused at
    /// the start: every screenshot of that desktop without a declared size would fail.
    /// Before, 8192×4320 was taken (each side within 8192).
    @Test func aGeometryPastTheScreenshotCapIsRefused() throws {
        let refused = #"invalid value "8192x4320" for --desktop-geometry: expected WxH, each 64 to 8192, at most 33177600 pixels in all (as 7680x4320: the largest screenshot)"#
        #expect(throws: ConfigurationError(refused)) { try Self.resolve(geometry: "8192x4320") }
        #expect(throws: ConfigurationError.self) { try Self.resolve(geometry: nil, environment: ["CODER_AGENT_DESKTOP_GEOMETRY": "8192x8192"]) }
        #expect(throws: ConfigurationError.self) { try Self.resolve(geometry: "8193x64") }
        // At the cap: taken.
        let largest = try Self.resolve(geometry: "7680x4320")
        #expect(largest.width == 7680 && largest.height == 4320)
        let widest = try Self.resolve(geometry: "8192x4050")
        #expect(widest.width == 8192 && widest.height == 4050)
        #expect(try Self.resolve(geometry: nil) == DesktopOptions.Configuration())
    }
}
