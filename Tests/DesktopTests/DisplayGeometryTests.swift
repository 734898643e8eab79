import Testing

@testable import Desktop

/// Every pinned scaling value and key normalization.
struct DisplayGeometryTests {
    @Test(arguments: [
        (1366, 768, 1366, 768), (1920, 1200, 1280, 800), (2048, 1536, 1024, 768), (3840, 2160, 1280, 720),
        (1568, 1000, 1280, 816), (1000, 2000, 758, 1516), (1920, 1080, 1280, 720),
    ])
    func recommendedSizes(native: (Int, Int, Int, Int)) {
        let size = DisplayGeometry.recommended(forNative: DisplayGeometry(width: native.0, height: native.1))
        #expect(size == DisplayGeometry(width: native.2, height: native.3))
    }

    @Test func pinnedMappings() {
        let declared = DisplayGeometry(width: 1280, height: 720)
        let native = DisplayGeometry(width: 1920, height: 1080)
        #expect(declared.map(x: 640, y: 360, to: native) == (960, 540))
        #expect(declared.map(x: 1279, y: 719, to: native) == (1919, 1079))
        #expect(declared.map(x: 5000, y: -5, to: native) == (1919, 0))
        #expect(declared.map(x: 853, y: 402, to: native) == (1280, 603))
        #expect(DisplayGeometry(width: 1366, height: 768).map(x: 1365, y: 767, to: native) == (1919, 1079))
        #expect(native.map(x: 960, y: 540, to: DisplayGeometry(width: 1366, height: 768)) == (683, 384))
        #expect(native.map(x: 960, y: 540, to: declared) == (640, 360), "cursor_position back to the declared space")
        #expect(native.map(x: 100, y: 200, to: native) == (100, 200))
        #expect(native.map(x: -3, y: 5000, to: native) == (0, 1079), "the same size only clamps")
    }

    @Test func keyNormalization() {
        #expect(KeyNames.normalize(combination: "CTRL+L") == "ctrl+l")
        #expect(KeyNames.normalize(combination: "ALT+F4") == "alt+F4")
        #expect(KeyNames.normalize(combination: "SHIFT+TAB") == "shift+Tab")
        #expect(KeyNames.normalize(combination: "CMD+A") == "super+a")
        #expect(KeyNames.normalize(combination: "RETURN") == "Return")
        #expect(KeyNames.normalize(combination: "page_down") == "Next")
        #expect(KeyNames.normalize(combination: "XF86AudioPlay") == "XF86AudioPlay")
        #expect(KeyNames.keysym("Return") == 0xFF0D)
        #expect(KeyNames.keysym("semicolon") == 0x3B)
        #expect(KeyNames.keysym("XF86AudioPlay") == 0x1008FF14)
        #expect(KeyNames.keysym("ctrl") == 0xFFE3)
        #expect(KeyNames.keysym("a") == 0x61)
        #expect(KeyNames.keysym("no-such-key") == nil)
        #expect(KeyNames.keysym(for: "é") == 0xE9)
        #expect(KeyNames.keysym(for: "€") == 0x0100_20AC)
    }
}
