import Foundation
import Testing

@testable import Desktop

/// The PNG encoder on its own, decoded by Python's zlib (``DesktopHarness/pixel(_:x:y:)``):
/// an image whose rows go to zlib in several batches comes back pixel for pixel.
@Suite struct PNGEncoderTests {
    /// A pattern whose every pixel differs from its neighbours and from the rows around it.
    static func colour(_ x: Int, _ y: Int) -> [Int] { [(x * 7 + y) & 255, (y * 13 + x / 3) & 255, (x ^ y) & 255] }

    @Test func rowsStreamedInBatchesDecodeToTheSamePixels() async throws {
        let width = 2000
        let height = 100
        let rowsPerBatch = PNGEncoder.batchBytes / (width * 3 + 1)
        #expect(rowsPerBatch < height / 2, "the image spans at least three batches")
        var pixels = [UInt8](repeating: 0, count: width * height * 4)
        for y in 0..<height {
            for x in 0..<width {
                let rgb = Self.colour(x, y)
                let at = (y * width + x) * 4
                (pixels[at], pixels[at + 1], pixels[at + 2], pixels[at + 3]) = (UInt8(rgb[0]), UInt8(rgb[1]), UInt8(rgb[2]), 0x77)
            }
        }
        let png = try PNGEncoder.encode(rgbx: pixels, width: width, height: height)
        let base64 = Data(png).base64EncodedString()
        // The first and last pixels, and both sides of each batch boundary.
        var points = [(0, 0), (width - 1, height - 1)]
        for boundary in stride(from: rowsPerBatch, to: height, by: rowsPerBatch) {
            points += [(width - 1, boundary - 1), (0, boundary), (width / 2, boundary)]
        }
        for (x, y) in points {
            let decoded = await DesktopHarness.pixel(base64, x: x, y: y)
            #expect(decoded.width == width && decoded.height == height)
            #expect(decoded.rgb == Self.colour(x, y), "pixel \(x),\(y)")
        }
    }

    @Test func anImageOutsideTheLimitsOrShortOfPixelsFails() {
        #expect(throws: PNGEncoder.Failure.self) { try PNGEncoder.encode(rgbx: [0, 0, 0, 0], width: 2, height: 1) }
        #expect(throws: PNGEncoder.Failure.self) { try PNGEncoder.encode(rgbx: [], width: 0, height: 0) }
    }
}
