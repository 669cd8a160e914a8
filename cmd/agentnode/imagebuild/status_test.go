package imagebuild

import "testing"

func TestStatusEmpty(t *testing.T) {
	imgs, err := Status(t.TempDir())
	if err != nil || len(imgs) != 0 {
		t.Fatalf("Status of an empty home = %v, %v", imgs, err)
	}
}
