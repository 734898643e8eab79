import CDesktop

/// Encodes RGBX pixels as an RGB PNG (8-bit, no alpha), each row with the `Sub` filter and
/// zlib at level 1: a desktop screenshot is mostly flat colour, which that compresses well
/// and fast.
enum PNGEncoder {
    struct Failure: Error {}

    /// `pixels` holds `width × height` pixels of 4 bytes (R, G, B, unused); the size is
    /// within ``DesktopLimits`` (else `Failure`, not a trap).
    static func encode(rgbx pixels: [UInt8], width: Int, height: Int, level: Int32 = 1) throws(Failure) -> [UInt8] {
        guard DesktopLimits.allowsImage(width: width, height: height), pixels.count >= width * height * 4 else { throw Failure() }
        let stride = width * 3 + 1
        var filtered = [UInt8](repeating: 0, count: stride * height)
        pixels.withUnsafeBufferPointer { source in
            filtered.withUnsafeMutableBufferPointer { out in
                for y in 0..<height {
                    let row = y * stride
                    out[row] = 1  // Sub: each byte minus the same channel of the pixel to its left
                    var previous: (UInt8, UInt8, UInt8) = (0, 0, 0)
                    var input = y * width * 4
                    var output = row + 1
                    for _ in 0..<width {
                        let r = source[input], g = source[input + 1], b = source[input + 2]
                        out[output] = r &- previous.0
                        out[output + 1] = g &- previous.1
                        out[output + 2] = b &- previous.2
                        previous = (r, g, b)
                        input += 4
                        output += 3
                    }
                }
            }
        }
        var compressed = [UInt8](repeating: 0, count: desktop_deflate_bound(filtered.count))
        var length = compressed.count
        let rc = filtered.withUnsafeBufferPointer { input in
            compressed.withUnsafeMutableBufferPointer { output in
                desktop_deflate(input.baseAddress, input.count, output.baseAddress, &length, level)
            }
        }
        guard rc == 0 else { throw Failure() }

        var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        png.reserveCapacity(length + 64)
        var header: [UInt8] = []
        header += bigEndian(UInt32(width))
        header += bigEndian(UInt32(height))
        header += [8, 2, 0, 0, 0]  // 8 bits, RGB, deflate, adaptive filters, no interlace
        chunk("IHDR", header, into: &png)
        compressed.withUnsafeBufferPointer { chunk("IDAT", UnsafeBufferPointer(rebasing: $0[0..<length]), into: &png) }
        chunk("IEND", [], into: &png)
        return png
    }

    private static func chunk<C: Collection>(_ type: String, _ data: C, into png: inout [UInt8]) where C.Element == UInt8 {
        png += bigEndian(UInt32(data.count))
        let typeBytes = Array(type.utf8)
        let start = png.count
        png += typeBytes
        png += data
        let crc = png.withUnsafeBufferPointer { desktop_crc32(0, $0.baseAddress! + start, png.count - start) }
        png += bigEndian(crc)
    }

    private static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
    }
}
