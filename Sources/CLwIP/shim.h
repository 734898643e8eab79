// Debian's liblwip-dev (lwIP 2.1.3, the unix port: NO_SYS=0, core locking, IPv6, TCP),
// found through pkg-config `lwip` (-I/usr/include/lwip -llwip). Swift code never uses lwIP
// directly: CLwIPGlue (C, compiled against the same lwipopts.h as the library) does, and
// this module only carries the include path and the link. The header is deliberately
// small so that importing the module does not bring lwIP's macros into Swift.
#include <lwip/init.h>
