#!/usr/bin/env python3
"""Regenerates the *.bin files here: QEMU's ACPI tables for
`-machine virt,virtualization=on,gic-version=3,acpi=on -cpu max -m 1G -smp 1`, as UEFI
(Debian's qemu-efi-aarch64) installs them, read back with the UEFI shell's `dmem`.

The tests map each table at the address the XSDT gives for it (see tests.rs), so after a
regeneration update QEMU10_ADDRESSES there from this script's output.
"""
import os, re, select, struct, subprocess, time

QEMU = ["qemu-system-aarch64", "-machine", "virt,virtualization=on,gic-version=3,acpi=on",
        "-cpu", "max", "-m", "1G", "-smp", "1", "-nographic", "-net", "none",
        "-bios", "/usr/share/qemu-efi-aarch64/QEMU_EFI.fd"]
PROMPT = b"Shell> "

qemu = subprocess.Popen(QEMU, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT)
os.set_blocking(qemu.stdout.fileno(), False)


def until_prompt(timeout):
    out, end = b"", time.time() + timeout
    while PROMPT not in out and time.time() < end:
        if select.select([qemu.stdout], [], [], 0.5)[0]:
            out += qemu.stdout.read() or b""
    return re.sub(r"\x1b\[[0-9;]*[a-zA-Z]", "", out.decode(errors="replace"))


def shell(command):
    for ch in command + "\r":  # the shell drops characters typed too fast
        qemu.stdin.write(ch.encode())
        qemu.stdin.flush()
        time.sleep(0.03)
    return until_prompt(120)


def dump(addr, length):
    data = bytearray()
    for line in shell("dmem %x %x" % (addr, length)).splitlines():
        m = re.match(r"\s*[0-9A-F]{8,16}: ((?:[0-9A-F]{2}[ -]){1,16})", line)
        if m:
            data += bytes(int(h, 16) for h in m.group(1).replace("-", " ").split())
    assert len(data) == length, (hex(addr), length, len(data))
    return bytes(data)


def save(name, data, addr):
    with open(name + ".bin", "wb") as f:
        f.write(data)
    print('("%s", %#x),' % (name, addr))


until_prompt(300)
rsdp_addr = int(re.search(r"ACPI 2.0 Table\s+([0-9A-F]+)", shell("dmem")).group(1), 16)
rsdp = dump(rsdp_addr, 36)
save("RSDP", rsdp, rsdp_addr)
xsdt_addr = struct.unpack_from("<Q", rsdp, 24)[0]
xsdt = dump(xsdt_addr, struct.unpack_from("<I", dump(xsdt_addr, 36), 4)[0])
save("XSDT", xsdt, xsdt_addr)
for offset in range(36, len(xsdt), 8):
    addr = struct.unpack_from("<Q", xsdt, offset)[0]
    header = dump(addr, 36)
    save(header[:4].decode(), dump(addr, struct.unpack_from("<I", header, 4)[0]), addr)
qemu.kill()
