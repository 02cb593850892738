package emu

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/tun"
)

// OpenTUN creates TUN device name in the calling thread's network
// namespace with IFF_VNET_HDR, so the kernel hands over TSO super-packets
// that are split into MTU packets here and accepts coalesced writes. The
// caller must be on a thread locked into the target namespace; the device
// keeps working from any thread afterwards.
func OpenTUN(name string) (Device, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("open /dev/net/tun: %w (load the tun module: modprobe tun)", err)
		}
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tun name %q: %w", name, err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI | unix.IFF_VNET_HDR)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("create tun %s: %w", name, err)
	}
	// CreateUnmonitoredTUNFromFD: the monitored variant's netlink listener
	// would bind to whatever namespace its goroutine runs in.
	dev, _, err := tun.CreateUnmonitoredTUNFromFD(fd)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("set up tun %s: %w", name, err)
	}
	return dev, nil
}
