import CDesktop

/// Encodes 4-byte pixels (RGBX, or the X server's own channel order) as an RGB PNG (8-bit,
/// no alpha), each row with the `Sub` filter and zlib at level 1: a desktop screenshot is
/// mostly flat colour, which that compresses well and fast.
///
/// Memory: rows are filtered a batch at a time (about 256 KiB) and streamed into zlib, whose
/// output grows as it comes; no whole filtered copy of the image and no buffer of zlib's
/// worst-case size are made (each had cost its size in fresh pages per screenshot).
enum PNGEncoder {
    struct Failure: Error {}

    /// Bytes of filtered rows handed to zlib at a time.
    static let batchBytes = 256 * 1024

    /// `pixels` holds `width × height` pixels of 4 bytes, red, green and blue at `channels`
    /// (RGBX unless said otherwise); the size is within ``DesktopLimits`` (else `Failure`,
    /// not a trap).
    static func encode(
        pixels: [UInt8], width: Int, height: Int, channels: PixelChannels = .rgbx, level: Int32 = 1
    ) throws(Failure) -> [UInt8] {
        guard DesktopLimits.allowsImage(width: width, height: height), channels.isValid, pixels.count >= width * height * 4 else {
            throw Failure()
        }
        let rowBytes = width * 3 + 1
        let rowsPerBatch = max(1, min(height, batchBytes / rowBytes))
        guard let deflater = desktop_deflater_begin(level, desktop_deflate_bound(rowBytes * height)) else { throw Failure() }
        defer { desktop_deflater_free(deflater) }
        var batch = [UInt8](repeating: 0, count: rowBytes * rowsPerBatch)
        var added = true
        pixels.withUnsafeBufferPointer { source in
            batch.withUnsafeMutableBufferPointer { out in
                var first = 0
                while first < height, added {  // bounded: `first` grows by a batch each pass
                    let rows = min(rowsPerBatch, height - first)
                    for row in 0..<rows {
                        filterRow(source, row: first + row, width: width, channels: channels, into: out, at: row * rowBytes)
                    }
                    added = desktop_deflater_add(deflater, out.baseAddress, rows * rowBytes) == 0
                    first += rows
                }
            }
        }
        var output: UnsafePointer<UInt8>?
        var length = 0
        guard added, desktop_deflater_finish(deflater, &output, &length) == 0, let output else { throw Failure() }

        var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        png.reserveCapacity(length + 64)
        var header: [UInt8] = []
        header += bigEndian(UInt32(width))
        header += bigEndian(UInt32(height))
        header += [8, 2, 0, 0, 0]  // 8 bits, RGB, deflate, adaptive filters, no interlace
        chunk("IHDR", header, into: &png)
        chunk("IDAT", UnsafeBufferPointer(start: output, count: length), into: &png)
        chunk("IEND", [], into: &png)
        return png
    }

    /// Row `y` of `source` as a PNG row: the `Sub` filter type, then each byte minus the same
    /// channel of the pixel to its left.
    private static func filterRow(
        _ source: UnsafeBufferPointer<UInt8>, row y: Int, width: Int, channels: PixelChannels,
        into out: UnsafeMutableBufferPointer<UInt8>, at start: Int
    ) {
        out[start] = 1
        var previous: (UInt8, UInt8, UInt8) = (0, 0, 0)
        var input = y * width * 4
        var output = start + 1
        let (red, green, blue) = (channels.red, channels.green, channels.blue)
        for _ in 0..<width {
            let r = source[input + red], g = source[input + green], b = source[input + blue]
            out[output] = r &- previous.0
            out[output + 1] = g &- previous.1
            out[output + 2] = b &- previous.2
            previous = (r, g, b)
            input += 4
            output += 3
        }
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
