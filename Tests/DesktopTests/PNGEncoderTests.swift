import Foundation
import Testing

@testable import Desktop

/// The PNG encoder on its own, decoded by Python's zlib (``DesktopHarness/pixel(_:x:y:)``):
/// an image whose rows go to zlib in several batches comes back pixel for pixel.
@Suite struct PNGEncoderTests {
    /// A pattern whose every pixel differs from its neighbours and from the rows around it.
    static func colour(_ x: Int, _ y: Int) -> [Int] { [(x * 7 + y) & 255, (y * 13 + x / 3) & 255, (x ^ y) & 255] }

    /// Pixels no compressor shrinks much (SplitMix64 of the pixel's index): zlib's output
    /// outgrows its first buffer several times.
    static func noise(_ x: Int, _ y: Int) -> [Int] {
        var z = UInt64(y * 2000 + x) &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return [Int(z & 255), Int((z >> 8) & 255), Int((z >> 16) & 255)]
    }

    /// Encodes `colour` at `width` × 100 and checks, decoded, the first and last pixels and
    /// both sides of each batch boundary (the last batch is a partial one).
    func roundTrip(width: Int, channels: PixelChannels = .rgbx, _ colour: (Int, Int) -> [Int]) async throws -> Int {
        let height = 100
        let rowsPerBatch = PNGEncoder.batchBytes / (width * 3 + 1)
        #expect(rowsPerBatch < height / 2 && height % rowsPerBatch != 0, "at least three batches, the last partial")
        var pixels = [UInt8](repeating: 0, count: width * height * 4)
        for y in 0..<height {
            for x in 0..<width {
                let rgb = colour(x, y)
                let at = (y * width + x) * 4
                // The unused byte: the four positions sum to 0 + 1 + 2 + 3.
                pixels[at + 6 - channels.red - channels.green - channels.blue] = 0x77
                pixels[at + channels.red] = UInt8(rgb[0])
                pixels[at + channels.green] = UInt8(rgb[1])
                pixels[at + channels.blue] = UInt8(rgb[2])
            }
        }
        let png = try PNGEncoder.encode(pixels: pixels, width: width, height: height, channels: channels)
        let base64 = Data(png).base64EncodedString()
        var points = [(0, 0), (width - 1, height - 1)]
        for boundary in stride(from: rowsPerBatch, to: height, by: rowsPerBatch) {
            points += [(width - 1, boundary - 1), (0, boundary), (width / 2, boundary)]
        }
        for (x, y) in points {
            let decoded = await DesktopHarness.pixel(base64, x: x, y: y)
            #expect(decoded.width == width && decoded.height == height)
            #expect(decoded.rgb == colour(x, y), "pixel \(x),\(y)")
        }
        return png.count
    }

    @Test func rowsStreamedInBatchesDecodeToTheSamePixels() async throws {
        _ = try await roundTrip(width: 2000, Self.colour)
    }

    /// The X server's own order (Xvnc's 24-bit depth on a little-endian host: blue, green,
    /// red, unused), read as it is.
    @Test func pixelsInTheServersChannelOrderComeOutAsRGB() async throws {
        _ = try await roundTrip(width: 2000, channels: PixelChannels(red: 2, green: 1, blue: 0), Self.colour)
    }

    @Test func anIncompressibleImageOutgrowsZlibsFirstBuffer() async throws {
        let size = try await roundTrip(width: 2000, Self.noise)
        #expect(size > 4 * 64 * 1024, "zlib's output grew past its first 64 KiB more than once")
    }

    @Test func anImageOutsideTheLimitsOrShortOfPixelsFails() {
        #expect(throws: PNGEncoder.Failure.self) { try PNGEncoder.encode(pixels: [0, 0, 0, 0], width: 2, height: 1) }
        #expect(throws: PNGEncoder.Failure.self) { try PNGEncoder.encode(pixels: [], width: 0, height: 0) }
    }
}
