package images

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ErrHostProgram means a program an image needs is not installed on the building machine.
var ErrHostProgram = errors.New("not installed on this machine (make host-packages installs the Debian packages the images take programs from)")

// hostProgramFiles returns the files of the named programs as installed here (found on PATH), and
// of every shared library and the loader `ldd` lists for them, each at its path on this machine.
// Symbolic links are followed (the file is stored under the link's name, which is what the loader
// opens).
func hostProgramFiles(programs []string) (map[string]file, error) {
	files := map[string]file{}
	for _, name := range programs {
		program, err := exec.LookPath(name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, ErrHostProgram)
		}
		if program, err = filepath.Abs(program); err != nil {
			return nil, err
		}
		out, err := exec.Command("ldd", program).Output()
		if err != nil {
			return nil, fmt.Errorf("listing the libraries of %s (ldd): %w", program, err)
		}
		paths := []string{program}
		for line := range strings.Lines(string(out)) {
			// ldd exits 0 when a library is missing; the image would hold a program that cannot
			// start, found only when the container runs.
			if lib, _, missing := strings.Cut(strings.TrimSpace(line), " => not found"); missing {
				return nil, fmt.Errorf("%s needs %s, which ldd does not find on this machine", program, lib)
			}
			for f := range strings.FieldsSeq(line) {
				if strings.HasPrefix(f, "/") {
					paths = append(paths, f)
				}
			}
		}
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				return nil, fmt.Errorf("reading %s for the image: %w", p, err)
			}
			files[p] = file{data: data, mode: 0o755}
		}
	}
	return files, nil
}
