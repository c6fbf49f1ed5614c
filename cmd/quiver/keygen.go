package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/quiverdb/quiver/store"
)

// newKeygen makes a key pair for signed commit records.
func newKeygen(stdout io.Writer) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "keygen --out FILE",
		Short: "Make an ed25519 key pair for signed commit records",
		Long: `Write a new ed25519 private key to FILE (PEM, mode 0600) and its public key
to FILE.pub. Give the private key to the server (quiver serve --signing-key
FILE): every commit record it writes is then signed. Give the public key to
auditors (quiver verify --public-key FILE.pub): a record rewritten by anyone
without the private key — even with write access to the data directory —
fails verification. Keep the private key off the machines whose disks it
protects, if you can.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return errors.New("--out FILE is required")
			}
			priv, pub, err := store.GenerateSigningKey()
			if err != nil {
				return err
			}
			f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			if _, err := f.Write(priv); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			if err := os.WriteFile(out+".pub", pub, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "private key: %s\npublic key:  %s.pub\n", out, out)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "file for the private key (the public key goes to FILE.pub)")
	return cmd
}
