import unittest

from stack import Stack


class StackTest(unittest.TestCase):
    def test_last_in_first_out(self):
        stack = Stack()
        stack.push(1)
        stack.push(2)
        self.assertEqual(stack.pop(), 2)
        self.assertEqual(stack.pop(), 1)
