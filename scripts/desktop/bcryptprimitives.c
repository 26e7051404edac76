/* bcryptprimitives.dll for Wine 8 (Debian's), which lacks it: Rust's standard library for
 * Windows (since 1.78) takes its random bytes from its ProcessPrng, so without it no Rust
 * program starts under that Wine ("Library bcryptprimitives.dll not found", exit 53).
 * Test environment only (scripts/desktop.sh puts it into its Wine prefix); nothing ships
 * it, and Windows has its own. ProcessPrng, as Windows documents it, over advapi32's
 * RtlGenRandom (SystemFunction036), which Wine has. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
    while (length > 0) {
        ULONG chunk = length > 0x7fffffff ? 0x7fffffff : (ULONG)length;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
