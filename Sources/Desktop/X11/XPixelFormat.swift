/// How the X server lays out the pixels of the root window in a `GetImage` ZPixmap reply
/// (from its connection setup): bits per pixel, byte order and the root visual's channel
/// masks. Turns such pixels into the RGBX rows the screenshot path scales and encodes.
struct XPixelFormat: Sendable, Equatable {
    /// 16 or 32 (the only sizes supported: Xvnc's `-depth 24` is 32, `-depth 16` is 16).
    var bitsPerPixel: Int
    /// Each scanline is padded to a multiple of this many bits.
    var scanlinePad: Int
    /// The server's image byte order: true for most significant byte first.
    var bigEndian: Bool
    var redMask: UInt32
    var greenMask: UInt32
    var blueMask: UInt32

    /// Bytes in one ZPixmap row of `width` pixels, padding included.
    func bytesPerRow(width: Int) -> Int {
        let bits = width * bitsPerPixel
        let pad = max(scanlinePad, 8)
        return (bits + pad - 1) / pad * pad / 8
    }

    /// Whether this format can be converted (16 or 32 bits, masks of 1 to 8 contiguous bits).
    var isSupported: Bool {
        guard bitsPerPixel == 16 || bitsPerPixel == 32 else { return false }
        return [redMask, greenMask, blueMask].allSatisfy { mask in
            let bits = mask >> UInt32(mask.trailingZeroBitCount)
            return mask != 0 && bits & (bits &+ 1) == 0 && bits.nonzeroBitCount <= 8
        }
    }

    /// Turns `data` (`height` rows of ``bytesPerRow(width:)`` bytes) into RGBX rows (4 bytes
    /// a pixel, X = 255). The common case (32 bits, 8-bit channels) converts in place, with
    /// no second buffer. Requires ``isSupported`` and that much data.
    /// Where red, green and blue sit within each 4-byte pixel of rows `width` pixels wide
    /// that can be read as they are: 32 bits a pixel, 8-bit channels on byte boundaries
    /// (Xvnc's `-depth 24`) and no row padding. Nil for every other format.
    func channels(width: Int) -> PixelChannels? {
        guard bitsPerPixel == 32, bytesPerRow(width: width) == width * 4,
            [redMask, greenMask, blueMask].allSatisfy({ $0.nonzeroBitCount == 8 && $0.trailingZeroBitCount % 8 == 0 })
        else { return nil }
        // Byte positions of each channel within a pixel, in memory order.
        func position(_ mask: UInt32) -> Int {
            let byte = mask.trailingZeroBitCount / 8
            return bigEndian ? 3 - byte : byte
        }
        return PixelChannels(red: position(redMask), green: position(greenMask), blue: position(blueMask))
    }

    func convertToRGBX(_ data: inout [UInt8], width: Int, height: Int) {
        let stride = bytesPerRow(width: width)
        precondition(data.count >= stride * height && isSupported)
        if let channels = channels(width: width) {
            let (r, g, b) = (channels.red, channels.green, channels.blue)
            data.withUnsafeMutableBufferPointer { buffer in
                var index = 0
                let end = width * height * 4
                while index < end {
                    let (red, green, blue) = (buffer[index + r], buffer[index + g], buffer[index + b])
                    buffer[index] = red
                    buffer[index + 1] = green
                    buffer[index + 2] = blue
                    buffer[index + 3] = 255
                    index += 4
                }
            }
            return
        }
        var out = [UInt8](repeating: 255, count: width * height * 4)
        let channels = [redMask, greenMask, blueMask].map { (shift: UInt32($0.trailingZeroBitCount), max: $0 >> UInt32($0.trailingZeroBitCount)) }
        let bytes = bitsPerPixel / 8
        data.withUnsafeBufferPointer { source in
            out.withUnsafeMutableBufferPointer { target in
                for y in 0..<height {
                    var index = y * stride
                    var to = y * width * 4
                    for _ in 0..<width {
                        var value: UInt32 = 0
                        for k in 0..<bytes {
                            let byte = UInt32(source[index + (bigEndian ? k : bytes - 1 - k)])
                            value = value << 8 | byte
                        }
                        for (c, channel) in channels.enumerated() {
                            let level = (value >> channel.shift) & channel.max
                            target[to + c] = UInt8((level * 255 + channel.max / 2) / channel.max)
                        }
                        index += bytes
                        to += 4
                    }
                }
            }
        }
        data = out
    }
}
